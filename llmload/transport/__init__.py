"""Streaming a request over HTTP and timing every event.

Both transports take a request body and return a :class:`~llmload.metrics.record.RequestRecord`; for
the same stream they produce the same record (tests/e2e/test_transport.py holds them to it).

* :mod:`.fast` (``FastTransport``, the default): own HTTP/1.1 framing over one keep-alive
  connection per user; :mod:`.reader` reads every stream of the process in one epoll set with
  kernel receive timestamps; :mod:`.stream` is the response state machine with its fast path.
* :mod:`.sdk` (``OpenAITransport``, ``--transport openai``): the official openai SDK.
* :mod:`.target`: the URL; :mod:`.models`: the one ``GET /v1/models`` (preflight, model, manifest);
  :mod:`.connection`: the key, headers,
  query, TLS, proxy, deadlines and limits of a connection (``ClientOptions``).

Usage::

    t = make_transport("fast", "http://127.0.0.1:8000", "/v1/chat/completions", ClientOptions(timeout=60))
    t.connect()
    rec = t.stream(body_bytes, meta)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from llmload.metrics.record import RequestMeta, RequestRecord
from llmload.transport.connection import ClientOptions
from llmload.transport.fast import FastTransport
from llmload.transport.models import first_model
from llmload.transport.sdk import OpenAITransport
from llmload.transport.target import Target

TRANSPORTS = ("fast", "openai")

__all__ = ["TRANSPORTS", "ClientOptions", "FastTransport", "OpenAITransport", "Target", "Transport", "first_model",
           "make_transport"]


class Transport(Protocol):
    """What a user needs of a transport."""

    def connect(self) -> None:
        """Open the connection ahead of the first request (raises OSError when unreachable)."""

    def close(self) -> None: ...

    def stream(self, body: bytes, meta: RequestMeta, want_text: bool = False,
               headers: dict[str, str] | None = None,
               on_cancel: Callable[[RequestRecord], None] | None = None) -> RequestRecord:
        """Send one streaming request and time it; never raises for server or network faults."""


def make_transport(kind: str, base_url: str, path: str, options: ClientOptions) -> Transport:
    """A transport by its ``--transport`` name."""
    if kind not in TRANSPORTS:
        raise ValueError(f"--transport {kind!r}: expected one of {', '.join(TRANSPORTS)}")
    cls = OpenAITransport if kind == "openai" else FastTransport
    return cls(base_url, path, options)
