"""A finished request in Locust's own table and events: the request event (its E2E as the response
time, the response body's bytes as the length: Locust's "size" column; output tokens are on the LLM
tab; its status as the exception), and for an ok request a TTFT and a TPOT row of its scenario in
Locust's table.

Usage::

    to_locust(environment, record)      # LLMLoadPlugin.record, once per finished request
"""

from __future__ import annotations

from typing import Any

from llmload.metrics.record import CANCELLED, OK, RequestRecord


def to_locust(env: Any, rec: RequestRecord) -> None:
    name = rec.meta.scenario
    if rec.status != CANCELLED:
        env.events.request.fire(
            request_type="LLM", name=name, response_time=rec.e2e_ms or 0.0,
            response_length=rec.response_bytes,  # Locust's "size" column is bytes (output tokens: the LLM tab)
            exception=None if rec.status == OK else rec.status, context={"request_id": rec.meta.request_id},
        )
    if rec.status == OK and env.runner is not None:
        # Extra rows in Locust's table; logged on the entries alone so the Aggregated row
        # (stats.total) still counts each request once.
        stats = env.runner.stats
        if rec.ttft_ms is not None:
            stats.get(name, "TTFT").log(rec.ttft_ms, 0)
        if rec.tpot_ms is not None:
            stats.get(name, "TPOT").log(rec.tpot_ms, 0)
