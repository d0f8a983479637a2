"""The headers a router can pin requests by (``--affinity-headers``). Pure.

Two headers, each one fact about the request:

* ``X-Llmload-Session-Id``: the unit a router should keep on one replica: the session's id on
  every turn of a session, else the id of the shared prefix the request carries (absent when it
  has neither). nginx hashes it (``hash $http_x_llmload_session_id``); LiteLLM's proxy reads any
  ``x-…-session-id`` header as the session for its ``session_affinity`` pins.
* ``X-Llmload-Prefix-Id``: the shared prefix (``WORKLOAD.GROUP`` + index, e.g. ``rag.handbook3``)
  on every request that carries one, sessions' turns included: for a router that should keep a
  prefix together across sessions (the sweep's ``affinity_key: prefix``).

Values are made of letters, digits, ``-`` and ``_`` and are at least 8 characters long
(``session-…``, ``prefix-…``): LiteLLM ignores a session id that is not.

Usage::

    affinity_headers("s1a2b-3", "rag.faq4", None)
    # {"X-Llmload-Session-Id": "session-s1a2b-3", "X-Llmload-Prefix-Id": "prefix-rag_faq4"}
"""

from __future__ import annotations

import re

SESSION_HEADER = "X-Llmload-Session-Id"
PREFIX_HEADER = "X-Llmload-Prefix-Id"
_UNSAFE = re.compile(r"[^A-Za-z0-9_-]")


def _value(kind: str, raw: str) -> str:
    return f"{kind}-" + _UNSAFE.sub("_", raw)


def affinity_headers(session_id: str, prefix_id: str, headers: dict[str, str] | None) -> dict[str, str] | None:
    """``headers`` with the two affinity headers added (the request's own headers win); unchanged
    when the request has neither a session nor a shared prefix."""
    if not session_id and not prefix_id:
        return headers
    out = {SESSION_HEADER: _value("session", session_id) if session_id else _value("prefix", prefix_id)}
    if prefix_id:
        out[PREFIX_HEADER] = _value("prefix", prefix_id)
    return {**out, **(headers or {})}
