"""A process's LLM statistics, per scenario (and per model of a ``models:`` mix), cumulative plus the
delta a worker ships, and their wire format; each scenario's numbers are a
:class:`~llmload.metrics.scenario_stats.ScenarioStats`. Pure, no I/O.

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
  ``reported_input_tokens``, ``requested_image_tokens``, ``resent_input_tokens`` (the part of the
  requested prompt sent before by design): sums over the ``compared`` ok requests that know both
  lengths; ``compressed``, ``coalesced``: responses and reads; ``late``: requests
  later than ``LATE_MS``; ``backoff_waits``, ``backoff_ms``: waits after 429/503 and their sum.
* ``first_start``, ``last_end``: Unix times, None when there were no requests.
* ``schedule_lag``: a histogram (ms) or None; ``tasks``:
  :meth:`llmload.metrics.agent_tasks.TaskStats.to_wire` or None.
* ``models`` (only in runs with ``models:`` mixes): model → the same fields over that model's
  requests of the scenario (no tasks); merged into :attr:`LLMStats.models` and written as the
  per-model rows of ``PREFIX_llm_stats.csv`` (:meth:`LLMStats.model_rows`).
"""

from __future__ import annotations

from typing import Any

from llmload.metrics.agent_tasks import TaskRecord
from llmload.metrics.record import RequestRecord
from llmload.metrics.scenario_stats import ScenarioStats

AGGREGATED = "Aggregated"


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
