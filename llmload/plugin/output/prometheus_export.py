"""llmload's own metrics in Prometheus' format, for ``/llmload/metrics`` on Locust's web UI (the
master, or a local process: where every request's row arrives). Built with ``prometheus_client``
on a registry of its own (never the process's default one).

Fed by the rows the run writes (``PREFIX_requests.csv``'s, with or without ``--csv``): one
observation per finished request and metric, never per token, so the streams' read loop does not
change. Names follow OpenTelemetry's GenAI semantic conventions, in Prometheus form (dots become
underscores, the unit a suffix), where one exists; the others are ``llmload_*``:

* ``gen_ai_client_operation_duration_seconds`` (histogram; ``gen_ai.client.operation.duration``,
  its buckets 0.01 … 81.92 s): E2E of every request that has one, label ``error_type`` (the status;
  empty for ok);
* ``gen_ai_client_operation_time_to_first_chunk_seconds`` (``gen_ai.client.operation.time_to_first_chunk``,
  the same buckets): TTFT of ok requests;
* ``llmload_client_time_per_output_token_seconds`` (the client's side of
  ``gen_ai.server.time_per_output_token``, its buckets 0.01 … 2.5 s): TPOT of ok requests;
* ``llmload_client_itl_max_seconds`` (same buckets): each ok request's longest gap between tokens;
* ``gen_ai_client_token_usage`` (``gen_ai.client.token.usage``, its buckets 1, 4, 16 … 67,108,864 tokens,
  label ``gen_ai_token_type`` input/output): tokens per ok request;
* ``llmload_requests_total`` (counter, label ``status``), ``llmload_tokens_total`` (counter,
  ``gen_ai_token_type``);
* gauges read at scrape time: ``llmload_requests_in_flight`` (per scenario), ``llmload_running_users``,
  ``llmload_client_limited`` (1 when a load-generating process is client-limited) and
  ``llmload_client_cpu_percent_max``.

Every series carries ``scenario`` and ``gen_ai_request_model`` (``--model``, else the model the
server listed first; empty until known).

Usage::

    metrics = LLMLoadMetrics(model_of=lambda: "m", state=lambda: {"users": 4, "in_flight": {}, "health": []})
    metrics.add_rows(rows)                 # RequestRecord.row() tuples
    body = metrics.exposition()            # bytes, text format 0.0.4
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily

from llmload import files

DURATION_BUCKETS = (0.01, 0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.28, 2.56, 5.12, 10.24, 20.48, 40.96, 81.92)
PER_TOKEN_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5)
TOKEN_BUCKETS = tuple(float(4 ** k) for k in range(14))  # 1, 4, 16, ... 67,108,864
LABELS = ("scenario", "gen_ai_request_model")
# llmload's own metric names (the families; prometheus_client adds _total, _bucket, ...), so that a
# test can tell them from the plugin's message names
NAMES = ("llmload_client_time_per_output_token_seconds", "llmload_client_itl_max_seconds", "llmload_requests",
         "llmload_tokens", "llmload_requests_in_flight", "llmload_running_users", "llmload_client_limited",
         "llmload_client_cpu_percent_max")
_C = files.COL


def _seconds(ms: Any) -> float | None:
    try:
        v = float(ms)
    except (TypeError, ValueError):
        return None
    return v / 1000.0 if math.isfinite(v) and v >= 0 else None


def _count(v: Any) -> float | None:
    try:
        n = float(v)
    except (TypeError, ValueError):
        return None
    return n if math.isfinite(n) and n >= 0 else None


class _Gauges:
    """The gauges, read from the run when Prometheus scrapes (a custom collector)."""

    def __init__(self, model_of: Callable[[], str], state: Callable[[], dict[str, Any]]) -> None:
        self._model_of = model_of
        self._state = state

    def collect(self) -> Iterable[GaugeMetricFamily]:
        state = self._state()
        model = self._model_of() or ""
        flight = GaugeMetricFamily("llmload_requests_in_flight", "Requests sent and not finished yet.",
                                   labels=list(LABELS))
        for scenario, n in sorted((state.get("in_flight") or {}).items()):
            flight.add_metric([scenario, model], n)
        yield flight
        yield GaugeMetricFamily("llmload_running_users", "Locust users running now.", value=state.get("users") or 0)
        health = state.get("health") or []
        yield GaugeMetricFamily("llmload_client_limited", "1 when a load-generating process is client-limited "
                                "(its numbers measure the client, not the server).",
                                value=float(any(h.get("limited") for h in health)))
        yield GaugeMetricFamily("llmload_client_cpu_percent_max", "The busiest load-generating process's CPU.",
                                value=max((float(h.get("cpu") or 0) for h in health), default=0.0))


class LLMLoadMetrics:
    """See the module docstring."""

    def __init__(self, model_of: Callable[[], str], state: Callable[[], dict[str, Any]]) -> None:
        self.registry = CollectorRegistry()
        self._model_of = model_of
        r = self.registry
        self.duration = Histogram("gen_ai_client_operation_duration_seconds", "GenAI operation duration: each "
                                  "request's E2E (gen_ai.client.operation.duration).", [*LABELS, "error_type"],
                                  buckets=DURATION_BUCKETS, registry=r)
        self.ttft = Histogram("gen_ai_client_operation_time_to_first_chunk_seconds", "Time to the first output "
                              "token of ok requests (gen_ai.client.operation.time_to_first_chunk).", LABELS,
                              buckets=DURATION_BUCKETS, registry=r)
        self.tpot = Histogram("llmload_client_time_per_output_token_seconds", "Time per output token after the "
                              "first, per ok request (the client's gen_ai.server.time_per_output_token).", LABELS,
                              buckets=PER_TOKEN_BUCKETS, registry=r)
        self.itl_max = Histogram("llmload_client_itl_max_seconds", "Each ok request's longest gap between two "
                                 "output tokens.", LABELS, buckets=PER_TOKEN_BUCKETS, registry=r)
        self.token_usage = Histogram("gen_ai_client_token_usage", "Tokens per ok request (gen_ai.client.token.usage).",
                                     [*LABELS, "gen_ai_token_type"], buckets=TOKEN_BUCKETS, registry=r)
        self.requests = Counter("llmload_requests", "Finished requests, by status.", [*LABELS, "status"], registry=r)
        self.tokens = Counter("llmload_tokens", "Tokens of ok requests.", [*LABELS, "gen_ai_token_type"],
                              registry=r)
        r.register(_Gauges(model_of, state))

    def add_rows(self, rows: Iterable[tuple]) -> None:
        """Account finished requests' rows (``RequestRecord.row()`` order)."""
        model = self._model_of() or ""
        for row in rows:
            scenario, status = str(row[_C.scenario]), str(row[_C.status])
            self.requests.labels(scenario, model, status).inc()
            e2e = _seconds(row[_C.e2e_ms])
            if e2e is not None:
                self.duration.labels(scenario, model, "" if status == "ok" else status).observe(e2e)
            if status != "ok":
                continue
            for hist, col in ((self.ttft, _C.ttft_ms), (self.tpot, _C.tpot_ms), (self.itl_max, _C.itl_max_ms)):
                v = _seconds(row[col])
                if v is not None:
                    hist.labels(scenario, model).observe(v)
            for kind, col in (("input", _C.prompt_tokens), ("output", _C.completion_tokens)):
                n = _count(row[col])
                if n is not None:
                    self.token_usage.labels(scenario, model, kind).observe(n)
                    self.tokens.labels(scenario, model, kind).inc(n)

    def exposition(self) -> bytes:
        """The text format (0.0.4) of every metric."""
        return generate_latest(self.registry)
