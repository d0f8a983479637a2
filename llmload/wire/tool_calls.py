"""A streamed reply's tool calls, put back together from their ``delta.tool_calls`` pieces. Pure.

Servers stream a call the way vLLM does: a first piece with ``index``, ``id``, ``type`` and the
function ``name``, then pieces with the same ``index`` and a slice of ``function.arguments``
each. Pieces are merged by ``index`` as the openai SDK's stream helpers do: strings after the
first are appended (a name sent in pieces comes out whole), ``id`` and ``type`` are kept from
the first piece that has them. A piece without an index starts a new call when it has an id
and continues the last one otherwise (servers that send each call whole, without an index).

Usage::

    calls = assemble([{"index": 0, "id": "c1", "type": "function", "function": {"name": "f"}},
                      {"index": 0, "function": {"arguments": '{"q": '}},
                      {"index": 0, "function": {"arguments": '"x"}'}}])
    # [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": '{"q": "x"}'}}]
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any


def assemble(pieces: Iterable[Any]) -> list[dict[str, Any]]:
    """Whole tool calls, in index order, from their streamed pieces (non-dict pieces are skipped)."""
    calls: dict[int, dict[str, Any]] = {}
    for p in pieces:
        if not isinstance(p, dict):
            continue
        idx = p.get("index")
        if not isinstance(idx, int) or isinstance(idx, bool):
            idx = (max(calls) + 1 if p.get("id") else max(calls)) if calls else 0
        call = calls.get(idx)
        if call is None:
            call = calls[idx] = {"id": "", "type": "function", "function": {"name": "", "arguments": ""}}
        if p.get("id") and not call["id"]:
            call["id"] = str(p["id"])
        if p.get("type"):
            call["type"] = str(p["type"])
        fn = p.get("function")
        if isinstance(fn, dict):
            for key in ("name", "arguments"):
                v = fn.get(key)
                if isinstance(v, str):
                    call["function"][key] += v
                elif v is not None:  # a server that sends arguments as an object
                    call["function"][key] += json.dumps(v)
    return [calls[i] for i in sorted(calls)]
