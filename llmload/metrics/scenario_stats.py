"""One scenario's statistics from its records: latency histograms (ok requests only; ITL over every gap
of every ok stream), every status counted, token sums, the schedule lag of requests due at a time,
the waits after 429/503; mergeable, and written to the wire as :mod:`llmload.metrics.stats`
describes. Pure, no I/O.
"""

from __future__ import annotations

import math
from operator import attrgetter, itemgetter
from typing import Any

from llmload.files import COL
from llmload.metrics import catalog
from llmload.metrics.agent_tasks import TaskStats
from llmload.metrics.histogram import Histogram
from llmload.metrics.record import OK, STATUSES, RequestRecord, rounded

METRICS = catalog.HISTOGRAM_KEYS  # histogram keys, in llm_stats column order (metrics.catalog)
QUANTILES = catalog.STATS_QUANTILES
LATE_MS = 10.0
"""A request sent more than this after its scheduled time counts as late (the client fell behind)."""
_ROW_HIST = tuple(m.name for m in catalog.ROW_METRICS)  # histogram fed by each per-request metric, in order
_ROW_LATENCIES = attrgetter(*(m.row_column for m in catalog.ROW_METRICS))  # RequestRecord fields = CSV columns
_ROW_CELLS = itemgetter(*(getattr(COL, m.row_column) for m in catalog.ROW_METRICS))
_E2E_AT = _ROW_HIST.index("e2e")  # the request's end: start + E2E
(_START, _STATUS, _PROMPT, _CACHED, _COMPLETION, _REQUESTED, _SCHEDULED, _IMAGE, _BACKOFF, _RESENT) = (
    COL.start_time, COL.status, COL.prompt_tokens, COL.cached_tokens, COL.completion_tokens,
    COL.requested_input_tokens, COL.scheduled_time, COL.requested_image_tokens, COL.backoff_ms,
    COL.resent_input_tokens)


def stat_values(h: Histogram, stats: tuple[str, ...], digits: int = 3) -> list[float | None]:
    """``h``'s value of each statistic (``p95``, ``median``, ``mean``, ``max``), rounded; None when empty."""
    if not h:
        return [None] * len(stats)
    qs = [50.0 if s == "median" else float(s[1:]) for s in stats if s not in ("mean", "max")]
    found = iter(h.percentiles(qs) if qs else [])
    return [rounded(h.mean if s == "mean" else h.max if s == "max" else next(found), digits) for s in stats]


_WIRE_COUNTERS = (  # wire field → ScenarioStats attribute, for the plain counters
    ("output_tokens", "output_tokens"), ("prompt_tokens", "prompt_tokens"), ("cached_tokens", "cached_tokens"),
    ("requested_input_tokens", "requested_input"), ("reported_input_tokens", "reported_input"),
    ("compared", "compared"), ("compressed", "compressed"), ("coalesced", "coalesced"), ("late", "late"),
    ("requested_image_tokens", "requested_image"), ("backoff_waits", "backoff_waits"), ("backoff_ms", "backoff_ms"),
    ("resent_input_tokens", "resent_input"),
)


class ScenarioStats:
    __slots__ = ("hist", "status_counts", "output_tokens", "prompt_tokens", "cached_tokens", "first_start",
                 "last_end", "requested_input", "reported_input", "compared", "compressed", "coalesced", "lag",
                 "late", "requested_image", "tasks", "backoff_waits", "backoff_ms", "resent_input")

    def __init__(self) -> None:
        self.hist = {m: Histogram() for m in METRICS}
        self.status_counts: dict[str, int] = {}
        self.output_tokens = 0
        self.prompt_tokens = 0
        self.cached_tokens = 0
        self.first_start = math.inf
        self.last_end = -math.inf
        # requested vs reported prompt length, over ok requests that know both
        self.requested_input = 0  # text tokens the workload asked for
        self.reported_input = 0
        self.compared = 0
        self.compressed = 0  # responses the server compressed despite Accept-Encoding: identity
        self.coalesced = 0  # reads that carried several output events (their gaps are not in ITL)
        self.requested_image = 0  # image tokens the workload's pictures cost (Qwen2-VL's count)
        self.resent_input = 0  # of requested_input, what the workload sent before by design (sessions, graphs, agents)
        self.lag = Histogram()  # schedule lag, ms
        self.late = 0
        self.tasks = TaskStats()
        self.backoff_waits = 0  # requests after which a user waited (429/503/unreachable), and how long
        self.backoff_ms = 0.0

    def add(self, rec: RequestRecord) -> None:
        m = rec.meta
        self.add_values(rec.status, m.start_time, _ROW_LATENCIES(rec), rec.prompt_tokens, rec.cached_tokens,
                        rec.completion_tokens, m.requested_input_tokens, m.scheduled_time, m.requested_image_tokens,
                        rec.backoff_ms, m.resent_input_tokens)
        if rec.status == OK and rec.itl_ms:
            self.hist["itl"].record_many(rec.itl_ms)
        if rec.content_encoding:
            self.compressed += 1
        self.coalesced += rec.coalesced_reads

    def add_row(self, row: tuple) -> None:
        """Account a PREFIX_requests.csv row (tuple in CSV_COLUMNS order; no per-chunk ITL)."""
        self.add_values(row[_STATUS], row[_START], _ROW_CELLS(row), row[_PROMPT], row[_CACHED], row[_COMPLETION],
                        row[_REQUESTED], row[_SCHEDULED], row[_IMAGE], row[_BACKOFF], row[_RESENT])

    def add_values(self, st: str, start: float, latencies: tuple[float | None, ...], prompt: int | None,
                   cached: int | None, completion: int | None, requested: int | None, scheduled: float | None = None,
                   image: int | None = None, backoff_ms: float | None = None, resent: int | None = None) -> None:
        """Account one request; ``latencies``: the values of ``catalog.ROW_METRICS``, in order."""
        self.status_counts[st] = self.status_counts.get(st, 0) + 1
        if scheduled is not None and start:
            lag_ms = max(start - scheduled, 0.0) * 1000.0
            self.lag.record(lag_ms)
            self.late += lag_ms > LATE_MS
        if backoff_ms:
            self.backoff_waits += 1
            self.backoff_ms += backoff_ms
        if start < self.first_start:
            self.first_start = start
        end = start + (latencies[_E2E_AT] or 0.0) / 1000.0
        if end > self.last_end:
            self.last_end = end
        if st != OK:
            return
        self.output_tokens += completion or 0
        self.prompt_tokens += prompt or 0
        self.cached_tokens += cached or 0
        if requested is not None and prompt is not None:
            self.requested_input += requested
            self.resent_input += resent or 0
            self.requested_image += image or 0
            self.reported_input += prompt
            self.compared += 1
        h = self.hist
        for name, value in zip(_ROW_HIST, latencies):  # noqa: B905 (same length by construction; per request)
            if value is not None:
                h[name].record(value)

    def merge(self, other: ScenarioStats) -> None:
        for m in METRICS:
            self.hist[m].merge(other.hist[m])
        for k, v in other.status_counts.items():
            self.status_counts[k] = self.status_counts.get(k, 0) + v
        self.output_tokens += other.output_tokens
        self.prompt_tokens += other.prompt_tokens
        self.cached_tokens += other.cached_tokens
        self.first_start = min(self.first_start, other.first_start)
        self.last_end = max(self.last_end, other.last_end)
        self.requested_input += other.requested_input
        self.reported_input += other.reported_input
        self.compared += other.compared
        self.compressed += other.compressed
        self.coalesced += other.coalesced
        self.requested_image += other.requested_image
        self.resent_input += other.resent_input
        self.lag.merge(other.lag)
        self.late += other.late
        self.tasks.merge(other.tasks)
        self.backoff_waits += other.backoff_waits
        self.backoff_ms += other.backoff_ms

    @property
    def requests(self) -> int:
        return sum(self.status_counts.values())

    @property
    def ok(self) -> int:
        return self.status_counts.get(OK, 0)

    def to_wire(self) -> dict[str, Any]:
        """This scenario's numbers as plain, msgpack-safe values (the fields of the module docstring)."""
        wire: dict[str, Any] = {
            "histograms": {m: self.hist[m].to_wire() for m in METRICS if self.hist[m]},
            "statuses": self.status_counts,
            "first_start": self.first_start if self.requests else None,
            "last_end": self.last_end if self.requests else None,
            "schedule_lag": self.lag.to_wire() if self.lag else None,
            "tasks": self.tasks.to_wire() if self.tasks.count else None,
        }
        for key, attr in _WIRE_COUNTERS:
            wire[key] = getattr(self, attr)
        return wire

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> ScenarioStats:
        s = cls()
        for m, h in data["histograms"].items():
            s.hist[m] = Histogram.from_wire(h)
        s.status_counts = dict(data["statuses"])
        for key, attr in _WIRE_COUNTERS:
            setattr(s, attr, data.get(key, 0))
        if data["first_start"] is not None:
            s.first_start, s.last_end = data["first_start"], data["last_end"]
        if data["schedule_lag"]:
            s.lag = Histogram.from_wire(data["schedule_lag"])
        if data["tasks"]:
            s.tasks = TaskStats.from_wire(data["tasks"])
        return s

    def summary(self) -> dict[str, Any]:
        """One row of PREFIX_llm_stats.csv (the latency columns: ``Metric.stats_column``, vLLM's names)."""
        duration = max(self.last_end - self.first_start, 0.0) if self.requests else 0.0
        row: dict[str, Any] = {
            "requests": self.requests,
            "ok": self.ok,
            "failures": sum(v for k, v in self.status_counts.items() if k not in (OK, "cancelled")),
            "cancelled": self.status_counts.get("cancelled", 0),
        }
        for st in STATUSES[1:]:
            row[st] = self.status_counts.get(st, 0)
        row.update({
            "duration_s": round(duration, 3),
            "rps": round(self.ok / duration, 4) if duration else None,
            "output_tokens": self.output_tokens,
            "prompt_tokens": self.prompt_tokens,
            "cached_tokens": self.cached_tokens,
            "output_tps": round(self.output_tokens / duration, 3) if duration else None,
            "total_tps": round((self.output_tokens + self.prompt_tokens) / duration, 3) if duration else None,
            "cache_hit_ratio": round(self.cached_tokens / self.prompt_tokens, 4) if self.prompt_tokens else None,
            "requested_input_tokens_mean": round(self.requested_input / self.compared, 2) if self.compared else None,
            "requested_image_tokens_mean": round(self.requested_image / self.compared, 2) if self.compared else None,
            # the share of the requested prompt that was resent by design: what a prefix cache may serve of it
            "resent_input_share": round(self.resent_input / self.requested_input, 4) if self.requested_input else None,
            "prompt_tokens_mean": round(self.reported_input / self.compared, 2) if self.compared else None,
            "coalesced_reads": self.coalesced,
            "compressed_responses": self.compressed,
        })
        for metric in catalog.METRICS:
            h = self.hist[metric.name]
            row[metric.stats_column("mean")] = rounded(h.mean) if h else None
            values = h.percentiles(q for _, q in QUANTILES) if h else [None] * len(QUANTILES)
            for (stat, _), v in zip(QUANTILES, values, strict=True):
                row[metric.stats_column(stat)] = rounded(v)
            row[metric.stats_column("max")] = rounded(h.max) if h else None
        lag = self.lag
        p50, p99 = lag.percentiles((50.0, 99.0)) if lag else (None, None)
        row.update({"scheduled_requests": lag.count, "median_schedule_lag_ms": rounded(p50),
                    "p99_schedule_lag_ms": rounded(p99), "max_schedule_lag_ms": rounded(lag.max) if lag else None,
                    "late_requests": self.late})
        row.update(self.tasks.summary())
        row["backoff_waits"] = self.backoff_waits
        row["backoff_s"] = round(self.backoff_ms / 1000.0, 3)
        return row
