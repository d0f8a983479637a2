"""Taking a request in, the same for every endpoint: its arrival (the Unix time of its receipt, from
the kernel's receive time of its last bytes) and its id (``X-Request-Id``, else the mock's own), counted.

Usage::

    arrival_unix, rid = take_request(server, headers, rx_mono)
    admitted = admit(server, sock, headers, body, rx_mono, parse)   # None: a 400 or an HTTP fault was answered
"""

from __future__ import annotations

import time
from collections.abc import Callable
from time import perf_counter
from typing import Any

from llmload.mock.api import openai_api as api


def take_request(server: Any, headers: dict[str, str], rx_mono: float) -> tuple[float, str]:
    """A request taken: its arrival (Unix time of its receipt) and its id, counted."""
    server._ids += 1
    server.requests_total += 1
    return time.time() - (perf_counter() - rx_mono), headers.get("x-request-id") or f"mock-{server._ids}"


def admit(server: Any, sock: Any, headers: dict[str, str], body: bytes, rx_mono: float, parse: Callable[[bytes], Any],
          log_fault: Callable[[str, float, Any, Any], None] | None = None) -> tuple[str, float, Any, Any] | None:
    """A request of a whole-body or upload endpoint taken in: (its id, arrival, fault, parsed request),
    or None once a bad body (400) or an HTTP fault (429, 500, 503) has been answered and logged.
    ``log_fault(rid, arrival_unix, fault, request)`` logs the fault its own way (default: the common log line)."""
    arrival_unix, rid = take_request(server, headers, rx_mono)
    try:
        fault = server.faults.pick(headers.get("x-mock-fault"))
        req = parse(body)
    except (ValueError, api.BadRequest) as e:
        server._send(sock, 400, api.error_body(400, str(e)))
        server._log_request(rid, rx_mono, arrival_unix, None, "error:400", 0, 0)
        return None
    if fault is not None and fault.kind == "http":
        server._send(sock, fault.status, api.error_body(fault.status, f"mock fault: HTTP {fault.status}"))
        if log_fault is not None:
            log_fault(rid, arrival_unix, fault, req)
        else:
            server._log_request(rid, rx_mono, arrival_unix, None, f"fault:{fault.status}", req.tokens, 0, fault)
        return None
    return rid, arrival_unix, fault, req
