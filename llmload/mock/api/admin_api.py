"""The mock's admin endpoints, as vLLM and SGLang serve them: ``/reset_prefix_cache`` (vLLM) and
``/flush_cache`` (SGLang) really empty the engine's prefix cache; ``/start_profile`` and
``/stop_profile`` only note that a profiler would run. Each call is logged (one line, and one JSON
line in ``--admin-log FILE``: path, method, arrival time, status, body); ``--fail-admin PATH``
answers that path with 500 instead, to test a client's handling of a failing hook. A part of
:class:`llmload.mock.server.MockServer` kept apart (the server module is at its size cap).

Usage::

    if path in ADMIN_PATHS:
        serve_admin(server, sock, method, path, body)
"""

from __future__ import annotations

import json
import logging
import time
from typing import Any

from llmload.mock.api import openai_api as api

RESET_PATHS = ("/reset_prefix_cache", "/flush_cache")
PROFILE_PATHS = ("/start_profile", "/stop_profile")
ADMIN_PATHS = (*RESET_PATHS, *PROFILE_PATHS)

log = logging.getLogger("llmload.mock")


class AdminLog:
    """``--admin-log FILE``: one JSON line per admin call, flushed at once (a test reads it while the mock runs)."""

    def __init__(self, path: str) -> None:
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())

    def add(self, entry: dict[str, Any]) -> None:
        self._file.write(json.dumps(entry) + "\n")
        self._file.flush()

    def close(self) -> None:
        self._file.close()


def _body(body: bytes) -> Any:
    if not body.strip():
        return None
    try:
        return json.loads(body)
    except ValueError:
        return body[:200].decode("utf-8", "replace")


def serve_admin(server: Any, sock: Any, method: str, path: str, body: bytes) -> None:
    """Answer one admin call (vLLM takes POST; SGLang GET or POST) and log it."""
    arrival = time.time()
    if method not in ("POST", "GET"):
        server._send(sock, 405, api.error_body(405, f"{path} takes POST"))
        return
    entry: dict[str, Any] = {"path": path, "method": method, "arrival_unix": round(arrival, 6),
                             "body": _body(body)}
    if path in server.config.fail_admin:
        status, answer = 500, api.error_body(500, f"mock: {path} fails (--fail-admin)")
    elif path in RESET_PATHS:
        entry["blocks_cleared"] = server.engine.prefix_cache.clear()
        status, answer = 200, b""
    else:
        server.profiling = path == "/start_profile"
        status, answer = 200, b""
    entry["status"] = status
    log.info("mock: %s %s -> %d", method, path, status)
    if server.admin_log is not None:
        server.admin_log.add(entry)
    server._send(sock, status, answer, "application/json" if answer else "text/plain")
