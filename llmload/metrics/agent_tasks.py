"""Agent tasks as their users feel them: one task is several model calls, and what counts is the
time to finish it. Pure: records in, one :class:`TaskRecord` out.

* duration: from the first call's t0 to the end of the last call's stream (tool latencies and
  think time between the calls included);
* calls, and tokens: prompt and completion tokens summed over the calls;
* outcome: ``answered`` (the last reply had no tool call), ``step_limit`` (``max_steps`` calls and
  the model still asked for a tool) or ``failed`` (a call did not end ok; the task stops there).

The report derives the same from ``PREFIX_requests.csv`` (rows with a ``step_kind``, grouped
by ``session_id``; :mod:`llmload.report.sections.traffic`).

:class:`TaskStats` sums tasks per scenario, mergeable across processes, for the end-of-run
summary and ``PREFIX_llm_stats.csv``.

Usage::

    task = TaskTracker("agent", "a1f-3")
    task.add(record)                        # every call, in order
    rec = task.finish("answered")           # TaskRecord(duration_s=..., calls=..., ...)
    stats = TaskStats(); stats.add(rec, limit_s=30.0); stats.summary()["p95_task_s"]
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmload.metrics.histogram import Histogram
from llmload.metrics.record import RequestRecord

OUTCOMES = ("answered", "step_limit", "failed")


@dataclass(frozen=True, slots=True)
class TaskRecord:
    scenario: str
    task_id: str
    start_time: float  # Unix seconds at the first call's t0
    duration_s: float
    calls: int
    prompt_tokens: int
    completion_tokens: int
    outcome: str  # one of OUTCOMES

    @property
    def ok(self) -> bool:
        return self.outcome != "failed"


class TaskTracker:
    """Collects one task's calls; ``finish`` makes the record."""

    __slots__ = ("scenario", "task_id", "start", "end", "calls", "prompt", "completion")

    def __init__(self, scenario: str, task_id: str) -> None:
        self.scenario = scenario
        self.task_id = task_id
        self.start: float | None = None
        self.end = 0.0
        self.calls = 0
        self.prompt = 0
        self.completion = 0

    def add(self, rec: RequestRecord) -> None:
        start = rec.meta.start_time
        if self.start is None:
            self.start = start
        self.end = max(self.end, start + (rec.e2e_ms or 0.0) / 1000.0)
        self.calls += 1
        self.prompt += rec.prompt_tokens or 0
        self.completion += rec.completion_tokens or 0

    def finish(self, outcome: str) -> TaskRecord:
        if outcome not in OUTCOMES:
            raise ValueError(f"task outcome {outcome!r}: expected one of {', '.join(OUTCOMES)}")
        start = self.start if self.start is not None else 0.0
        return TaskRecord(self.scenario, self.task_id, start, max(self.end - start, 0.0), self.calls, self.prompt,
                          self.completion, outcome)


def outcome_of(rec: RequestRecord, step: int, max_steps: int) -> str | None:
    """How a task stands after one call: its outcome when it is over, None when it goes on."""
    if not rec.ok:
        return "failed"
    if not rec.tool_calls:
        return "answered"
    return "step_limit" if step >= max_steps else None


class TaskStats:
    """Per-scenario task totals, mergeable across processes (like
    :class:`llmload.metrics.scenario_stats.ScenarioStats`).

    ``within`` counts tasks that did not fail and finished within the scenario's task SLO
    (``task_pNN_s``), judged exactly when each task is added.
    """

    __slots__ = ("hist", "outcomes", "calls", "prompt", "completion", "within", "judged")

    def __init__(self) -> None:
        self.hist = Histogram()  # duration of tasks that did not fail, ms
        self.outcomes: dict[str, int] = {}
        self.calls = 0
        self.prompt = 0
        self.completion = 0
        self.within = 0
        self.judged = 0  # tasks added while a task SLO applied

    def add(self, task: TaskRecord, limit_s: float | None = None) -> None:
        self.outcomes[task.outcome] = self.outcomes.get(task.outcome, 0) + 1
        self.calls += task.calls
        self.prompt += task.prompt_tokens
        self.completion += task.completion_tokens
        if task.ok:
            self.hist.record(task.duration_s * 1000.0)
        if limit_s is not None:
            self.judged += 1
            self.within += task.ok and task.duration_s <= limit_s

    @property
    def count(self) -> int:
        return sum(self.outcomes.values())

    def merge(self, other: TaskStats) -> None:
        self.hist.merge(other.hist)
        for k, v in other.outcomes.items():
            self.outcomes[k] = self.outcomes.get(k, 0) + v
        self.calls += other.calls
        self.prompt += other.prompt
        self.completion += other.completion
        self.within += other.within
        self.judged += other.judged

    def to_wire(self) -> dict[str, Any]:
        return {"h": self.hist.to_wire() if self.hist else None, "o": self.outcomes,
                "n": [self.calls, self.prompt, self.completion, self.within, self.judged]}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> TaskStats:
        t = cls()
        if data.get("h"):
            t.hist = Histogram.from_wire(data["h"])
        t.outcomes = dict(data["o"])
        t.calls, t.prompt, t.completion, t.within, t.judged = data["n"]
        return t

    def summary(self) -> dict[str, Any]:
        """The task columns of PREFIX_llm_stats.csv (None where there were no tasks)."""
        n = self.count
        h = self.hist
        p50, p95, p99 = h.percentiles((50.0, 95.0, 99.0)) if h else (None, None, None)

        def s(ms: float | None) -> float | None:
            return None if ms is None else round(ms / 1000.0, 3)

        return {
            "tasks": n,
            **{f"tasks_{o}": self.outcomes.get(o, 0) for o in OUTCOMES},
            "mean_task_s": s(h.mean) if h else None,
            "median_task_s": s(p50), "p95_task_s": s(p95), "p99_task_s": s(p99),
            "max_task_s": s(h.max) if h else None,
            "calls_per_task": round(self.calls / n, 3) if n else None,
            "prompt_tokens_per_task": round(self.prompt / n, 1) if n else None,
            "completion_tokens_per_task": round(self.completion / n, 1) if n else None,
            "tasks_within_slo": round(self.within / self.judged, 4) if self.judged else None,
        }
