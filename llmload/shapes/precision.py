"""Precision stopping for the step shape, pure: end a step once its SLO percentiles are known well
enough, at the latest after ``--step-seconds``.

* **What is measured**: each latency SLO (``--slo``, the scenario's ``slo:``; an ``error_rate`` is
  a budget, not a percentile, and is left out): its percentile (or mean) over the step's settled
  ok requests, as :class:`llmload.shapes.search.StepSample` and ``llmload report`` take them (after
  the warm-up, from the first request at the step's level). Without a latency SLO: TTFT p95 and
  TPOT p95, the report's headline numbers.
* **Known well enough**: its 95 % interval (:mod:`llmload.metrics.intervals`: distribution-free
  order statistics for a percentile, mean ± 1.96·s/√n for a mean) lies within ``pct`` % of the
  value on both sides: ``value − lo ≤ pct/100 · value`` and ``hi − value ≤ pct/100 · value``. An
  open side (too few samples to bound a p95 from above: fewer than ~72) is never precise.
* **And the step is long enough**: the sample floor of ok requests is met and the measured part
  lasted 3 × their mean E2E (:meth:`StepSample.ready`, the report's "short step" rule).

:class:`PrecisionSteps` walks the steps on the wall clock: each tick either keeps the step, ends
it early (``ended: "precise"``) or at its cap (``ended: "cap"``, with why it was not precise), and
keeps a log of every step for PREFIX_run.json (``shape.step_log``), which the report shows per step.

Usage::

    ladder = PrecisionSteps((8, 16), step_seconds=60, pct=5, slos=[parse_slo("ttft_p95_ms=500")],
                            warmup_s=5, floor=30, now=time.time())
    control.watch_rows(ladder.add)
    users = ladder.users(time.time(), lag_s=0.5)     # None: every step is over
    ladder.log    # [{"users": 8, "seconds": 21.4, "ended": "precise", "why": "ttft_p95_ms 40.2 ±0.9 %..."}]
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from llmload.files import COL
from llmload.metrics.intervals import mean_ci, quantile_ci
from llmload.metrics.record import OK
from llmload.metrics.slo import ERROR_RATE, SLO, parse_slo
from llmload.shapes.search import StepSample

FALLBACK = ("ttft_p95_ms=inf", "tpot_p95_ms=inf")  # what is measured without a latency SLO (the limit is unused)


@dataclass(frozen=True)
class Estimate:
    """One SLO metric over one step: value and 95 % interval (None: open or nothing measured)."""

    name: str  # "ttft_p95_ms", "rag:tpot_p95_ms"
    n: int
    value: float | None
    lo: float | None
    hi: float | None

    def spread(self) -> float | None:
        """The larger side of the interval as a fraction of the value; None: an open side or no value."""
        if self.value is None or self.lo is None or self.hi is None or not self.value > 0:
            return None
        return max(self.value - self.lo, self.hi - self.value) / self.value

    def text(self) -> str:
        s = self.spread()
        if self.value is None:
            return f"{self.name}: no ok request"
        return f"{self.name} {self.value:.4g} ±{s * 100:.1f} %" if s is not None else \
            f"{self.name} {self.value:.4g} (interval open: {self.n} samples)"


def measured_slos(slos: Sequence[SLO]) -> list[SLO]:
    """The SLOs whose interval decides: the latency ones, else TTFT p95 and TPOT p95."""
    latency = [s for s in slos if s.metric != ERROR_RATE and s.column is not None]
    return latency or [parse_slo(t) for t in FALLBACK]


def estimate(slo: SLO, rows: Sequence[tuple]) -> Estimate:
    """``slo``'s metric over ``rows`` (request rows, REQUESTS_COLUMNS order), ok ones of its scenario
    (or of its model)."""
    col, status, scenario, model = getattr(COL, slo.column or ""), COL.status, COL.scenario, COL.model
    values = np.array([r[col] for r in rows if r[status] == OK and r[col] is not None
                       and (slo.scenario is None or r[scenario] == slo.scenario)
                       and (slo.model is None or r[model] == slo.model)], dtype=float)
    name = slo.key
    if not len(values):
        return Estimate(name, 0, None, None, None)
    if slo.quantile is None:
        lo, hi = mean_ci(values)
        return Estimate(name, len(values), float(values.mean()), lo, hi)
    lo, hi = quantile_ci(values, slo.quantile)
    return Estimate(name, len(values), float(np.percentile(values, slo.quantile)), lo, hi)


def precise(estimates: Sequence[Estimate], pct: float) -> bool:
    """Every interval within ``pct`` % of its value."""
    return bool(estimates) and all((s := e.spread()) is not None and s <= pct / 100.0 for e in estimates)


def why_text(estimates: Sequence[Estimate], pct: float, ok: int, floor: int, ready: bool) -> str:
    """Why a step ended (or did not end) early, in one line."""
    parts = ", ".join(e.text() for e in estimates)
    if ok < floor:
        return f"only {ok} ok requests (< {floor}); {parts}"
    if not ready:
        return f"measured less than 3 × the mean E2E; {parts}"
    wide = [e.text() for e in estimates if (s := e.spread()) is None or s > pct / 100.0]
    if wide:
        return f"not within {pct:g} %: " + ", ".join(wide)
    return f"{parts}: within {pct:g} % ({ok} ok requests)"


class PrecisionSteps:
    """The step ladder with early ends (see the module docstring). Feed it every row (:meth:`add`)."""

    def __init__(self, steps: Sequence[int], step_seconds: float, pct: float, slos: Sequence[SLO], warmup_s: float,
                 floor: int, now: float) -> None:
        if not pct > 0:
            raise ValueError(f"--step-precision {pct:g}: expected a percentage > 0, e.g. 5")
        self.steps, self.cap_s, self.pct = tuple(steps), float(step_seconds), float(pct)
        self.slos, self.warmup_s, self.floor = measured_slos(slos), float(warmup_s), int(floor)
        self.index = 0
        self.log: list[dict[str, Any]] = []
        self._sample = self._begin(now)

    def _begin(self, now: float) -> StepSample | None:
        if self.index >= len(self.steps):
            return None
        return StepSample(self.steps[self.index], "users", now, self.warmup_s, [], self.floor)

    def add(self, rows: list[tuple]) -> None:
        if self._sample is not None:
            self._sample.add(rows)

    def users(self, now: float, lag_s: float = 0.0) -> int | None:
        """The user count for ``now``: the current step's, the next one's once it is due, None at the end."""
        sample = self._sample
        if sample is None:
            return None
        elapsed = now - sample.started_at
        rows = sample.settled(now, lag_s)
        ready = sample.ready(now, lag_s)
        estimates = [estimate(s, rows) for s in self.slos]
        ok = sum(1 for r in rows if r[COL.status] == OK)
        done_early = ready and precise(estimates, self.pct)
        if done_early or elapsed >= self.cap_s:
            self.log.append({"users": self.steps[self.index], "started": round(sample.started_at, 3),
                             "seconds": round(min(elapsed, self.cap_s), 1),
                             "ended": "precise" if done_early else "cap",
                             "why": why_text(estimates, self.pct, ok, self.floor, ready)})
            self.index += 1
            self._sample = sample = self._begin(now)
            if sample is None:
                return None
        return self.steps[self.index]

    def describe(self) -> dict[str, Any]:
        return {"step_precision_pct": self.pct, "step_warmup_s": self.warmup_s, "step_sample_floor": self.floor,
                "step_log": list(self.log)}
