"""Capacity search, pure: bisect over measured load levels, and judge one step from its rows.

* :class:`Bisection`: the bracket ``[lo, hi]`` starts as ``[--search-min, --search-max]``
  (lo is assumed to pass and hi to fail until measured). Each probe measures the midpoint and
  halves the bracket. Once ``hi − lo ≤ precision``, an end of the bracket that was never
  measured is measured once (the lowest level, when every probe failed; the highest, when
  every probe passed), then the answer is held once more to confirm it. So a search uses at
  most ⌈log2((max − min) / precision)⌉ + 2 steps (:func:`step_bound`).
* :class:`StepSample`: the rows of one step, as ``llmload report`` will judge them: requests that
  started at this step's level after the warm-up (counted, as the report does, from the first
  request at that level; cancelled ones left out); latency SLOs over
  the ok ones (numpy percentiles, as the report), ``error_rate`` over all. A step is ready once
  it has ``floor`` ok requests and lasted 3 × their mean E2E, counting only requests old enough
  that the slow ones among them have had time to arrive.

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
from llmload.metrics.slo import ERROR_RATE, SLO

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

    def record(self, passed: bool, broken: list[str] | None = None) -> None:
        """The verdict on the level :meth:`next_level` gave."""
        if self._next is None:
            raise RuntimeError("record() without next_level()")
        level, kind, end = self._next
        self._next = None
        self.history.append(Probe(level, kind, passed, list(broken or [])))
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

    def describe(self) -> dict[str, Any]:
        return {"steps_used": len(self.history), "bound": self.bound, "answer": self.answer,
                "confirmed": self.confirmed, "done": self.done,
                "steps": [{"level": p.level, "kind": p.kind, "passed": p.passed, "broken": p.broken}
                          for p in self.history]}


class StepSample:
    """One step's rows, judged as the report will judge them (see the module docstring). The
    warm-up runs from the first request at the step's level, as the report's does: a step down
    reaches its level only once the users it stops have finished their requests."""

    def __init__(self, level: float, column: str, started_at: float, warmup_s: float, slos: list[SLO],
                 floor: int) -> None:
        self.level, self.column, self.started_at, self.warmup_s = level, column, started_at, warmup_s
        self.slos, self.floor = slos, floor
        self.rows: list[tuple] = []
        self.first: float | None = None  # the first request at this level
        self.max_e2e_s = 0.0

    @property
    def measure_from(self) -> float | None:
        if not self.warmup_s:
            return self.started_at
        return None if self.first is None else self.first + self.warmup_s

    def add(self, rows: list[tuple]) -> None:
        start, status, col, e2e = _COL["start_time"], _COL["status"], _COL[self.column], _COL["e2e_ms"]
        phase = _COL["phase"]
        for r in rows:
            if r[status] == CANCELLED or r[start] < self.started_at or r[col] is None or r[phase] == WARMUP_PHASE:
                continue
            if abs(float(r[col]) - self.level) > 1e-9:
                continue
            self.rows.append(r)
            self.first = r[start] if self.first is None else min(self.first, r[start])
            if r[e2e] is not None:
                self.max_e2e_s = max(self.max_e2e_s, float(r[e2e]) / 1000.0)

    def settled(self, now: float, lag_s: float) -> list[tuple]:
        """Rows of requests that started after the warm-up, and long enough ago that every one of
        them has arrived: before now − lag − 1.5 × the slowest E2E seen so far."""
        m0 = self.measure_from
        if m0 is None:
            return []
        cut = now - lag_s - 1.5 * self.max_e2e_s
        return [r for r in self.rows if m0 <= r[_COL["start_time"]] < cut]

    def ready(self, now: float, lag_s: float) -> bool:
        rows = self.settled(now, lag_s)
        ok = [r for r in rows if r[_COL["status"]] == OK]
        if len(ok) < self.floor:
            return False
        mean_e2e_s = float(np.mean([r[_COL["e2e_ms"]] or 0.0 for r in ok])) / 1000.0
        last = max(r[_COL["start_time"]] for r in rows)
        return last - (self.measure_from or last) >= E2E_MULTIPLE * mean_e2e_s

    def verdict(self, now: float, lag_s: float) -> tuple[bool, list[str]]:
        """(every SLO met, the broken ones as ``metric=value>limit``) over the settled rows."""
        rows = self.settled(now, lag_s)
        ok = sum(1 for r in rows if r[_COL["status"]] == OK)
        if ok < self.floor:
            return False, [f"only {ok} ok requests (< {self.floor})"]
        broken = []
        for slo in self.slos:
            mine = [r for r in rows if slo.scenario is None or r[_COL["scenario"]] == slo.scenario]
            value = slo_value(slo, mine)
            if value is not None and value > slo.limit:
                scope = f"{slo.scenario}:" if slo.scenario else ""
                broken.append(f"{scope}{slo.metric}={value:.4g}>{slo.limit:g}")
        return not broken, broken


def slo_value(slo: SLO, rows: list[tuple]) -> float | None:
    """The SLO's metric over rows (cancelled ones already left out); None with nothing to measure."""
    status = _COL["status"]
    if slo.metric == ERROR_RATE:
        return sum(1 for r in rows if r[status] != OK) / len(rows) if rows else None
    col = _COL[slo.column or ""]
    values = np.array([r[col] for r in rows if r[status] == OK and r[col] is not None], dtype=float)
    if not len(values):
        return None
    q = slo.quantile
    return float(values.mean()) if q is None else float(np.percentile(values, q))
