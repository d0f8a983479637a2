"""Per-scenario LLM statistics built from records: mergeable across processes. Pure, no I/O.

Only ``ok`` requests feed the latency histograms; every status is counted. ITL histograms get
every gap of every ok stream, so their percentiles are over chunks, not requests. Requests with
a ``scheduled_time`` (open-loop arrivals, trace replay) also feed a schedule-lag histogram
(``start_time − scheduled_time``, every status): the client falling behind its schedule. Agent
tasks are added with :meth:`LLMStats.add_task` (:class:`llmload.metrics.agent_tasks.TaskStats`).

Usage::

    stats = LLMStats()
    stats.add(record)
    wire = stats.take_delta()      # on a worker: what changed since the last call
    master_stats.merge_wire(wire)  # on the master

The wire format (``take_delta``; msgpack-safe: the payload of a worker's ``llmload_*`` messages,
:mod:`llmload.plugin.cluster.messages`) maps each scenario to named fields:

* ``histograms``: metric (``METRICS``) → :meth:`llmload.metrics.histogram.Histogram.to_wire`;
  only metrics with values. ``statuses``: status → requests.
* ``output_tokens``, ``prompt_tokens``, ``cached_tokens``: token sums; ``requested_input_tokens``,
  ``reported_input_tokens``, ``requested_image_tokens``: sums over the ``compared`` ok requests
  that know both lengths; ``compressed``, ``coalesced``: responses and reads; ``late``: requests
  later than ``LATE_MS``; ``backoff_waits``, ``backoff_ms``: waits after 429/503 and their sum.
* ``first_start``, ``last_end``: Unix times, None when there were no requests.
* ``schedule_lag``: a histogram (ms) or None; ``tasks``:
  :meth:`llmload.metrics.agent_tasks.TaskStats.to_wire` or None.
* ``models`` (only in runs with ``models:`` mixes): model → the same fields over that model's
  requests of the scenario (no tasks); merged into :attr:`LLMStats.models` and written as the
  per-model rows of ``PREFIX_llm_stats.csv`` (:meth:`LLMStats.model_rows`).
"""

from __future__ import annotations

import math
from operator import attrgetter, itemgetter
from typing import Any

from llmload.files import COL
from llmload.metrics import catalog
from llmload.metrics.agent_tasks import TaskRecord, TaskStats
from llmload.metrics.histogram import Histogram
from llmload.metrics.record import OK, STATUSES, RequestRecord, rounded

METRICS = catalog.HISTOGRAM_KEYS  # histogram keys, in llm_stats column order (metrics.catalog)
QUANTILES = catalog.STATS_QUANTILES
AGGREGATED = "Aggregated"
LATE_MS = 10.0
"""A request sent more than this after its scheduled time counts as late (the client fell behind)."""
_ROW_HIST = tuple(m.name for m in catalog.ROW_METRICS)  # histogram fed by each per-request metric, in order
_ROW_LATENCIES = attrgetter(*(m.row_column for m in catalog.ROW_METRICS))  # RequestRecord fields = CSV columns
_ROW_CELLS = itemgetter(*(getattr(COL, m.row_column) for m in catalog.ROW_METRICS))
_E2E_AT = _ROW_HIST.index("e2e")  # the request's end: start + E2E
(_START, _STATUS, _PROMPT, _CACHED, _COMPLETION, _REQUESTED, _SCHEDULED, _IMAGE, _BACKOFF) = (
    COL.start_time, COL.status, COL.prompt_tokens, COL.cached_tokens, COL.completion_tokens,
    COL.requested_input_tokens, COL.scheduled_time, COL.requested_image_tokens, COL.backoff_ms)


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
)


class ScenarioStats:
    __slots__ = ("hist", "status_counts", "output_tokens", "prompt_tokens", "cached_tokens", "first_start",
                 "last_end", "requested_input", "reported_input", "compared", "compressed", "coalesced", "lag",
                 "late", "requested_image", "tasks", "backoff_waits", "backoff_ms")

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
        self.lag = Histogram()  # schedule lag, ms
        self.late = 0
        self.tasks = TaskStats()
        self.backoff_waits = 0  # requests after which a user waited (429/503/unreachable), and how long
        self.backoff_ms = 0.0

    def add(self, rec: RequestRecord) -> None:
        m = rec.meta
        self.add_values(rec.status, m.start_time, _ROW_LATENCIES(rec), rec.prompt_tokens, rec.cached_tokens,
                        rec.completion_tokens, m.requested_input_tokens, m.scheduled_time, m.requested_image_tokens,
                        rec.backoff_ms)
        if rec.status == OK and rec.itl_ms:
            self.hist["itl"].record_many(rec.itl_ms)
        if rec.content_encoding:
            self.compressed += 1
        self.coalesced += rec.coalesced_reads

    def add_row(self, row: tuple) -> None:
        """Account a PREFIX_requests.csv row (tuple in CSV_COLUMNS order; no per-chunk ITL)."""
        self.add_values(row[_STATUS], row[_START], _ROW_CELLS(row), row[_PROMPT], row[_CACHED], row[_COMPLETION],
                        row[_REQUESTED], row[_SCHEDULED], row[_IMAGE], row[_BACKOFF])

    def add_values(self, st: str, start: float, latencies: tuple[float | None, ...], prompt: int | None,
                   cached: int | None, completion: int | None, requested: int | None, scheduled: float | None = None,
                   image: int | None = None, backoff_ms: float | None = None) -> None:
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
            setattr(s, attr, data[key])
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


class LLMStats:
    """Scenario → ScenarioStats, cumulative, plus a delta since the last ``take_delta``.

    A tracked request is recorded once, into the delta; ``take_delta`` folds the delta into the
    cumulative stats (merging buckets costs less than recording every value twice)."""

    def __init__(self) -> None:
        self.scenarios: dict[str, ScenarioStats] = {}
        self._delta: dict[str, ScenarioStats] = {}
        # models: mixes: (scenario, model) → the same numbers over that model's requests alone
        self.models: dict[tuple[str, str], ScenarioStats] = {}
        self._delta_models: dict[tuple[str, str], ScenarioStats] = {}

    def add(self, rec: RequestRecord, track_delta: bool = False) -> None:
        name = rec.meta.scenario
        into = self._delta if track_delta else self.scenarios
        s = into.get(name)
        if s is None:
            s = into[name] = ScenarioStats()
        s.add(rec)
        if rec.meta.model:  # a model of a mix: its own stats too (only runs with models: pay for it)
            by_model = self._delta_models if track_delta else self.models
            key = (name, rec.meta.model)
            m = by_model.get(key)
            if m is None:
                m = by_model[key] = ScenarioStats()
            m.add(rec)

    def _fold(self, delta: dict[str, ScenarioStats], models: dict[tuple[str, str], ScenarioStats]) -> None:
        for into, part in ((self.scenarios, delta), (self.models, models)):
            for key, d in part.items():
                s = into.get(key)
                if s is None:
                    s = into[key] = ScenarioStats()
                s.merge(d)

    def add_task(self, task: TaskRecord, limit_s: float | None = None, track_delta: bool = False) -> None:
        """Account one finished agent task (``limit_s``: its scenario's task SLO, if any)."""
        into = self._delta if track_delta else self.scenarios  # a delta is folded in when taken
        s = into.get(task.scenario)
        if s is None:
            s = into[task.scenario] = ScenarioStats()
        s.tasks.add(task, limit_s)

    def take_delta(self) -> dict[str, Any]:
        delta, self._delta = self._delta, {}
        models, self._delta_models = self._delta_models, {}
        self._fold(delta, models)
        wire = {name: s.to_wire() for name, s in delta.items()}
        for (name, model), s in models.items():  # a model's request is in its scenario's delta too
            wire[name].setdefault("models", {})[model] = s.to_wire()
        return wire

    def merge_wire(self, wire: dict[str, Any]) -> None:
        for name, data in wire.items():
            _merge_into(self.scenarios, name, ScenarioStats.from_wire(data))
            for model, part in (data.get("models") or {}).items():
                _merge_into(self.models, (name, model), ScenarioStats.from_wire(part))

    def _current(self, models: bool = False) -> dict[Any, ScenarioStats]:
        """Cumulative stats including the delta not yet taken (which stays to be taken); ``models``:
        those of each (scenario, model)."""
        done, delta = (self.models, self._delta_models) if models else (self.scenarios, self._delta)
        if not delta:
            return done
        out: dict[Any, ScenarioStats] = {}
        for key in {*done, *delta}:
            t = out[key] = ScenarioStats()
            for part in (done.get(key), delta.get(key)):
                if part is not None:
                    t.merge(part)
        return out

    def has_tasks(self) -> bool:
        """Some scenario has finished an agent task (or a call-graph session), here or merged in."""
        return any(s.tasks.outcomes for part in (self.scenarios, self._delta) for s in part.values())

    def model_rows(self) -> list[dict[str, Any]]:
        """PREFIX_llm_stats.csv's rows per model of a mix: one per (scenario, model), the ``model``
        column last; with several scenarios also each model over all of them (scenario Aggregated)."""
        current = self._current(models=True)
        rows = [{"scenario": name, **s.summary(), "model": model} for (name, model), s in sorted(current.items())]
        if len({name for name, _ in current}) > 1:
            totals: dict[str, ScenarioStats] = {}
            for (_, model), s in current.items():
                _merge_into(totals, model, s, copy=True)
            rows += [{"scenario": AGGREGATED, **s.summary(), "model": model} for model, s in sorted(totals.items())]
        return rows

    def rows(self) -> list[dict[str, Any]]:
        current = self._current()
        rows = [{"scenario": name, **s.summary()} for name, s in sorted(current.items())]
        if len(current) != 1:
            total = ScenarioStats()
            for s in current.values():
                total.merge(s)
            rows.append({"scenario": AGGREGATED, **total.summary()})
        return rows

    def clear(self) -> None:
        self.scenarios.clear()
        self._delta.clear()
        self.models.clear()
        self._delta_models.clear()


def _merge_into(into: dict[Any, ScenarioStats], key: Any, part: ScenarioStats, copy: bool = False) -> None:
    """``part`` added to ``into[key]`` (``copy``: never keep ``part`` itself, it is someone else's)."""
    s = into.get(key)
    if s is None and not copy:
        into[key] = part
        return
    if s is None:
        s = into[key] = ScenarioStats()
    s.merge(part)
