"""Capacity search, pure: bisect over measured load levels, and judge one step from its rows.

* :class:`Bisection`: the bracket ``[lo, hi]`` starts as ``[--search-min, --search-max]``
  (lo is assumed to pass and hi to fail until measured). Each probe measures the midpoint and
  halves the bracket. Once ``hi − lo ≤ precision``, an end of the bracket that was never
  measured is measured once (the lowest level, when every probe failed; the highest, when
  every probe passed), then the answer is held once more to confirm it. So a search uses at
  most ⌈log2((max − min) / precision)⌉ + 2 steps (:func:`step_bound`).
* :class:`StepSample`: the rows of one step, judged by the report's own judge
  (:func:`llmload.metrics.step_verdict.judge_step`) on the report's window rule: requests that
  started at this step's level after the warm-up (counted, as the report does, from the first
  request at that level; cancelled ones left out), up to where the search closes the step. A step
  is ready once it has ``floor`` ok requests and lasted 3 × their mean E2E, counting only requests
  old enough that the slow ones among them have had time to arrive (started before now − lag −
  1.5 × the slowest E2E seen): that moment is where the window closes (``judged_until``). Each
  probe records its window (``measured_from``, ``judged_until``) in ``PREFIX_run.json``, and
  ``llmload report`` measures the step over exactly that window, so both judge the same rows.
* :func:`llmload.metrics.step_verdict.monotone_capacity` over the probes is the search's answer as
  the report states it: an answer whose confirmation broke an SLO is not capacity.

Usage::

    b = Bisection(4, 36, 4, integer=True)
    while (level := b.next_level()) is not None:
        b.record(run_step_at(level))          # True: every SLO met
    b.answer, b.confirmed, len(b.history), step_bound(4, 36, 4)   # 16, True, 4, 5
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llmload.files import WARMUP_PHASE
from llmload.metrics.record import CANCELLED, CSV_COLUMNS, OK
from llmload.metrics.slo import SLO
from llmload.metrics.step_verdict import (
    NO_VERDICT,
    StepVerdict,
    WindowRows,
    judge_step,
    measured_from,
    monotone_capacity,
)

MODES = ("users", "rate")
E2E_MULTIPLE = 3.0  # a step lasts at least this many mean E2Es past its warm-up (the report warns below it)
_COL = {c: i for i, c in enumerate(CSV_COLUMNS)}


def step_bound(lo: float, hi: float, precision: float) -> int:
    """The most steps a search over [lo, hi] to ``precision`` can use."""
    return max(0, math.ceil(math.log2((hi - lo) / precision))) + 2 if hi > lo else 2


@dataclass
class Probe:
    level: float
    kind: str  # "probe" (bisection), "end" (an end of the bracket never measured), "confirm"
    passed: bool
    broken: list[str] = field(default_factory=list)
    state: str = ""  # the step verdict: met, broken or no verdict
    measured_from: float | None = None  # the judged window [measured_from, judged_until), epoch s
    judged_until: float | None = None
    late: int = 0  # requests of the window that arrived after the verdict (the report judges them too)


class Bisection:
    """The search's state: call :meth:`next_level`, measure it, :meth:`record` the verdict."""

    def __init__(self, lo: float, hi: float, precision: float, integer: bool) -> None:
        if not hi > lo:
            raise ValueError(f"search: expected --search-max > --search-min, got {lo:g} and {hi:g}")
        if not precision > 0 or (integer and precision != int(precision)):
            raise ValueError(f"--search-precision {precision:g}: expected " +
                             ("a whole number of users >= 1" if integer else "requests/s > 0"))
        self.lo, self.hi, self.precision, self.integer = lo, hi, precision, integer
        self.min, self.max = lo, hi
        self.lo_measured = self.hi_measured = False
        self.history: list[Probe] = []
        self.answer: float | None = None  # the highest level that met every SLO (None: not even the lowest)
        self.confirmed: bool | None = None
        self.done = False
        self._next: tuple[float, str, str] | None = None  # level, kind, which end ("low"/"high")

    @property
    def bound(self) -> int:
        return step_bound(self.min, self.max, self.precision)

    def _mid(self) -> float:
        if self.integer:
            return float((int(self.lo) + int(self.hi)) // 2)
        return round((self.lo + self.hi) / 2.0, 6)

    def next_level(self) -> float | None:
        """The level to measure next; None when the search is over."""
        if self.done:
            return None
        if self.hi - self.lo > self.precision:
            self._next = (self._mid(), "probe", "")
        elif not self.lo_measured:
            self._next = (self.lo, "end", "low")
        elif not self.hi_measured and self.answer is None:
            self._next = (self.hi, "end", "high")
        else:
            self.answer = self.lo if self.answer is None else self.answer
            self._next = (self.answer, "confirm", "")
        return self._next[0]

    def record(self, passed: bool, broken: list[str] | None = None, state: str = "",
               window: tuple[float | None, float | None] = (None, None)) -> Probe:
        """The verdict on the level :meth:`next_level` gave (``window``: where it was judged)."""
        if self._next is None:
            raise RuntimeError("record() without next_level()")
        level, kind, end = self._next
        self._next = None
        probe = Probe(level, kind, passed, list(broken or []), state or ("met" if passed else "broken"), *window)
        self.history.append(probe)
        if kind == "confirm":
            self.confirmed, self.done = passed, True
        elif kind == "probe":
            if passed:
                self.lo, self.lo_measured = level, True
            else:
                self.hi, self.hi_measured = level, True
        elif end == "low":  # the lowest level, never measured before: it is the answer if it passes
            self.lo_measured = True
            if passed:
                self.answer = level
            else:
                self.answer, self.done = None, True
        else:  # the highest level, never measured before
            self.hi_measured = True
            if passed:
                self.lo = self.answer = level
        return probe

    @property
    def capacity(self) -> float | None:
        """The answer as ``llmload report`` states it: the highest level every step at which met every
        SLO, below the lowest that broke one (steps without a verdict left out)."""
        return monotone_capacity((p.level, p.passed) for p in self.history if p.state != NO_VERDICT)

    def describe(self) -> dict[str, Any]:
        return {"steps_used": len(self.history), "bound": self.bound, "answer": self.answer,
                "confirmed": self.confirmed, "capacity": self.capacity, "done": self.done,
                "steps": [{"level": p.level, "kind": p.kind, "passed": p.passed, "verdict": p.state,
                           "broken": p.broken, "measured_from": p.measured_from, "judged_until": p.judged_until,
                           "late": p.late} for p in self.history]}


class StepSample:
    """One step's rows, judged as the report will judge them (see the module docstring). The
    warm-up runs from the first request at the step's level, as the report's does: a step down
    reaches its level only once the users it stops have finished their requests. ``scenarios``:
    the run's scenarios seen so far (a set the caller keeps; None: this step's)."""

    def __init__(self, level: float, column: str, started_at: float, warmup_s: float, slos: list[SLO],
                 floor: int, scenarios: set[str] | None = None) -> None:
        self.level, self.column, self.started_at, self.warmup_s = level, column, started_at, warmup_s
        self.slos, self.floor, self.scenarios = slos, floor, scenarios
        self.rows: list[tuple] = []
        self.first: float | None = None  # the first request at this level
        self.last_start: float | None = None  # the latest start among its rows
        self.max_e2e_s = 0.0

    @property
    def measure_from(self) -> float | None:
        if not self.warmup_s:
            return self.started_at
        return None if self.first is None else measured_from(self.first, self.warmup_s)

    def add(self, rows: list[tuple]) -> int:
        """Keep the rows of this step; returns how many."""
        start, status, col, e2e = _COL["start_time"], _COL["status"], _COL[self.column], _COL["e2e_ms"]
        phase, kept = _COL["phase"], 0
        for r in rows:
            if r[status] == CANCELLED or r[start] < self.started_at or r[col] is None or r[phase] == WARMUP_PHASE:
                continue
            if abs(float(r[col]) - self.level) > 1e-9:
                continue
            self.rows.append(r)
            kept += 1
            self.first = r[start] if self.first is None else min(self.first, r[start])
            self.last_start = r[start] if self.last_start is None else max(self.last_start, r[start])
            if r[e2e] is not None:
                self.max_e2e_s = max(self.max_e2e_s, float(r[e2e]) / 1000.0)
        return kept

    def cut(self, now: float, lag_s: float) -> float:
        """Requests that started before this have all arrived, as far as can be told: now − lag −
        1.5 × the slowest E2E seen so far. Where the window closes when the step is judged now."""
        return now - lag_s - 1.5 * self.max_e2e_s

    def settled(self, now: float, lag_s: float) -> list[tuple]:
        """Rows of requests that started after the warm-up and before :meth:`cut`."""
        m0 = self.measure_from
        if m0 is None:
            return []
        cut = self.cut(now, lag_s)
        return [r for r in self.rows if m0 <= r[_COL["start_time"]] < cut]

    def in_window(self, rows: list[tuple], until: float) -> int:
        """How many of ``rows`` (arrived after the verdict) belong to the window closed at ``until``."""
        m0, start, status, col = self.measure_from, _COL["start_time"], _COL["status"], _COL[self.column]
        return sum(1 for r in rows if m0 is not None and m0 <= r[start] < until and r[status] != CANCELLED
                   and r[col] is not None and abs(float(r[col]) - self.level) <= 1e-9)

    def ready(self, now: float, lag_s: float) -> bool:
        rows = self.settled(now, lag_s)
        ok = [r for r in rows if r[_COL["status"]] == OK]
        if len(ok) < self.floor:
            return False
        scoped = {s.scenario for s in self.slos if s.scenario is not None and not s.per_task}
        scoped &= self.scenarios if self.scenarios is not None else {str(r[_COL["scenario"]]) for r in rows}
        if any(sum(1 for r in ok if r[_COL["scenario"]] == name) < self.floor for name in scoped):
            return False  # a scenario with an SLO of its own needs its floor too (no verdict without)
        models = {s.model for s in self.slos if s.model is not None}  # and a model with one (models: mixes)
        if any(sum(1 for r in ok if r[_COL["model"]] == name) < self.floor for name in models):
            return False
        mean_e2e_s = float(np.mean([r[_COL["e2e_ms"]] or 0.0 for r in ok])) / 1000.0
        last = max(r[_COL["start_time"]] for r in rows)
        return last - (self.measure_from or last) >= E2E_MULTIPLE * mean_e2e_s

    def judge(self, now: float, lag_s: float) -> StepVerdict:
        """The step verdict over the settled rows, the window closing at :meth:`cut`."""
        rows = self.settled(now, lag_s)
        scenarios = self.scenarios if self.scenarios is not None else {str(r[_COL["scenario"]]) for r in rows}
        window = WindowRows.from_tuples(rows, {s.column for s in self.slos if s.column})
        m0 = self.measure_from
        duration = self.cut(now, lag_s) - m0 if m0 is not None else 0.0
        return judge_step(window, self.slos, self.floor, scenarios, duration)

    def verdict(self, now: float, lag_s: float) -> tuple[bool, list[str]]:
        """(every SLO met, the broken ones as ``metric=value>limit``, or why there is no verdict)."""
        v = self.judge(now, lag_s)
        return v.met, (v.broken_text() if v.state != NO_VERDICT else [v.why])
