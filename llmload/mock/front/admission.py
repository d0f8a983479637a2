"""Turning an arrival away at a full queue (``--max-queue``): the 429 and its log line.

The decision is :func:`llmload.mock.engine.priority_engine.sheds` (pure); this is the server's side of it.

Usage (in the server, once the body is parsed)::

    if turn_away(server, sock, req, rid, arrival_mono, arrival_unix):
        return True      # answered 429 and logged as shed:429
"""

from __future__ import annotations

import socket
from typing import Any

from llmload.mock.api import openai_api as api
from llmload.mock.engine.priority_engine import SHED_STATUS, sheds, waiting_priorities

SHED_OUTCOME = f"shed:{SHED_STATUS}"  # the log's outcome (and /metrics' request_success outcome label)


def turn_away(server: Any, sock: socket.socket, req: api.ParsedRequest, rid: str, arrival_mono: float,
              arrival_unix: float) -> bool:
    """Answer ``SHED_STATUS`` and log it when the queue ahead of ``req`` is full; False: let it in."""
    config = server.config
    waiting = waiting_priorities(server.engine)
    if not sheds(waiting, req.priority, config.max_queue, config.scheduling):
        return False
    ra = config.retry_after_s
    server._send(sock, SHED_STATUS, api.error_body(SHED_STATUS, f"mock: {config.max_queue} or more requests wait "
                                                               "ahead of this one (--max-queue): shed"),
                 extra=f"retry-after: {ra:g}\r\n" if ra is not None else "")
    server._log_request(rid, arrival_mono, arrival_unix, None, SHED_OUTCOME, len(req.prompt_words), 0)
    return True
