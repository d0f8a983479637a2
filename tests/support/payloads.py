"""Honest payloads of llmload's master↔worker messages, made by the code that makes them in a run
(records, LLMStats, ClientHealth), for the tests that check, fuzz and forge them."""

from __future__ import annotations

import time
from typing import Any

from llmload.health.sampler import ClientHealth
from llmload.metrics.record import RequestMeta, RequestRecord
from llmload.metrics.stats import LLMStats
from llmload.plugin.cluster import messages

V = messages.PROTOCOL_VERSION


def record(i: int, worker: int = 0, scenario: str = "chat", status: str = "ok", start: float | None = None,
           model: str = "") -> RequestRecord:
    meta = RequestMeta(request_id=f"w{worker}x-{i}", start_time=time.time() if start is None else start,
                       scenario=scenario, max_tokens=16, users=4, worker=worker, requested_input_tokens=30,
                       model=model)
    if status != "ok":
        return RequestRecord(meta=meta, status=status, http_status=500, e2e_ms=3.0, error="boom")
    return RequestRecord(meta=meta, status="ok", http_status=200, ttft_ms=12.5 + i % 7, ttft_visible_ms=12.5,
                         tpot_ms=2.25, e2e_ms=50.0 + i, itl_max_ms=4.0, prompt_tokens=30, cached_tokens=10,
                         completion_tokens=16, token_source="usage", finish_reason="length",
                         itl_ms=[2.0, 2.5, 3.0], output_events=16)


def rows(n: int, worker: int = 0, first: int = 0, start: float | None = None) -> list[list]:
    """Request rows as msgpack delivers them (lists)."""
    return [list(record(i, worker, status="ok" if i % 5 else "http_5xx", start=start).row())
            for i in range(first, first + n)]


def stats_delta(n: int = 5, worker: int = 0, models: bool = False) -> dict[str, Any]:
    stats = LLMStats()
    for i in range(n):
        stats.add(record(i, worker, status="ok" if i % 4 else "timeout", model="m-a" if models else ""),
                  track_delta=True)
    return stats.take_delta()


def health() -> dict[str, Any]:
    h = ClientHealth()
    h.tokens, h.coalesced = 100, 2
    return h.take(3)


def report(index: int = 0, token: str = "", n: int = 5) -> dict[str, Any]:
    return messages.REPORT.payload(stats=stats_delta(n, index), in_flight={"chat": 2}, health=health(), index=index,
                                   version=V, token=token, copy=None)


def final(index: int = 0, token: str = "", n_rows: int = 3) -> dict[str, Any]:
    return {**report(index, token), "rows": rows(n_rows, index), "final": True}


def rows_message(n: int = 3, worker: int = 0, token: str = "", first: int = 0) -> dict[str, Any]:
    return messages.ROWS.payload(rows=rows(n, worker, first), token=token, version=V)


def users(n: int = 4, token: str = "") -> dict[str, Any]:
    return messages.USERS.payload(t=time.time(), n=n, token=token, version=V)


def every_message(index: int = 0) -> dict[str, Any]:
    """One honest payload of each declared message, by name (FINAL in its full form)."""
    now = time.time()
    return {
        messages.USERS.name: users(), messages.ROWS.name: rows_message(worker=index), messages.SENT.name: "w0x-1",
        messages.REPORT.name: report(index), messages.FINAL.name: final(index),
        messages.TRACE_DONE.name: messages.TRACE_DONE.payload(index=index, token="", version=V),
        messages.STOP.name: None, messages.COUNTS.name: messages.COUNTS.payload(t=now, counts={"w1": 3, "w2": 4}),
        messages.PROCESSES.name: messages.PROCESSES.payload(n=2, csv="runs/x", csv_dir="/m/runs", csv_dir_id=[5, 6],
                                                                 run_id="r1", version=V),
        messages.RATE.name: messages.RATE.payload(rate=2.5), messages.TRACE_T0.name: messages.TRACE_T0.payload(t0=now),
        messages.TRACE_T0_ASK.name: messages.TRACE_T0_ASK.payload(token="", version=V),
        messages.WARMUP.name: messages.WARMUP.payload(seconds=10.0, ended_at=None),
        messages.PHASE.name: messages.PHASE.payload(label="together", at=now),
    }
