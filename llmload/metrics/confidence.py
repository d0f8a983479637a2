"""How sure a step's numbers are: 95 % intervals and "borderline" SLO verdicts. Pure numpy.

* A percentile's and a mean's interval are :mod:`llmload.metrics.intervals`' (order statistics;
  mean ± z·s/√n), shared with the step shape's precision stop. An error rate's is Wilson's score
  interval.
* An SLO verdict is **borderline** when its limit lies inside the interval: more requests could
  flip it. (An error rate with no failure is never borderline: the budget is about failures seen.)
  How many more requests would settle it, roughly, if the samples keep their shape: for a
  percentile, with F the share of samples under the limit, the n at which the interval's rank
  nq + ½ ± z·√(nq(1−q)) passes Fn: n·|F − q| − z·√(q(1−q))·√n − ½ = 0, so
  √n* = (z·√(q(1−q)) + √(z²·q(1−q) + 2·|F − q|)) / (2·|F − q|) (with F = 1 and q = 0.95: 92); for a
  mean, n* = (z·s / (mean − limit))²; for an error rate, z²·p(1−p)/(p − limit)². The report turns
  it into seconds at the step's own rate.

Usage::

    quantile_ci(np.arange(1.0, 101.0), 95)      # (91.0, 100.0)
    judge(slo, values, errors=0, finished=100, rate_per_s=5.0)
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from llmload.metrics.intervals import Z95, mean_ci, quantile_ci
from llmload.metrics.slo import ERROR_RATE, SLO

__all__ = ["Z95", "judge", "mean_ci", "quantile_ci", "settle_text", "wilson_ci"]

def wilson_ci(errors: int, n: int, z: float = Z95) -> tuple[float | None, float | None]:
    if not n:
        return None, None
    p = errors / n
    den = 1.0 + z * z / n
    mid = (p + z * z / (2 * n)) / den
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / den
    return max(0.0, mid - half), min(1.0, mid + half)


def _r(v: float | None) -> float | None:
    return None if v is None else round(v, 4)


def judge(slo: SLO, values: np.ndarray, errors: int, finished: int, rate_per_s: float) -> dict[str, Any]:
    """The verdict of one SLO over one step: value, limit, met, n, ci95, borderline and, when
    borderline, ``settle_requests``/``settle_seconds`` (None: too close to the limit to say).
    ``values`` are the ok requests' column (NaN-free); ``rate_per_s`` how fast the step gathers
    samples (ok requests, or finished ones for an error rate, per second)."""
    limit = slo.limit
    if slo.metric == ERROR_RATE:
        n = finished
        value = errors / n if n else None
        lo, hi = wilson_ci(errors, n)
        needed = _needed(value, limit, (value or 0.0) * (1 - (value or 0.0))) if value is not None else None
        can_flip = errors > 0
    else:
        n = len(values)
        q = slo.quantile
        if not n:
            value, lo, hi, needed = None, None, None, None
        elif q is None:
            value = float(values.mean())
            lo, hi = mean_ci(values)
            needed = _needed(value, limit, float(values.var(ddof=1)) if n > 1 else 0.0)
        else:
            value = float(np.percentile(values, q))
            lo, hi = quantile_ci(values, q)
            p = q / 100.0
            gap = abs(float((values <= limit).mean()) - p)
            root = Z95 * math.sqrt(p * (1 - p))
            needed = ((root + math.sqrt(root * root + 2 * gap)) / (2 * gap)) ** 2 if gap > 1e-12 else None
        can_flip = True
    met = value is not None and value <= limit
    borderline = bool(value is not None and can_flip and (lo is None or lo <= limit) and (hi is None or limit < hi))
    out: dict[str, Any] = {"value": _r(value), "limit": limit, "met": met, "n": n, "ci95": [_r(lo), _r(hi)],
                           "borderline": borderline}
    if borderline:
        more = None if needed is None else max(1, math.ceil(needed) - n)
        out["settle_requests"] = more
        out["settle_seconds"] = None if more is None or not rate_per_s > 0 else round(more / rate_per_s, 1)
    return out


def _needed(estimate: float, target: float, variance: float) -> float | None:
    """Samples at which ``estimate`` sits z standard errors from ``target``; None when they are equal."""
    gap = abs(estimate - target)
    if gap <= 1e-12:
        return None
    return Z95 * Z95 * variance / (gap * gap)


def settle_text(verdict: dict[str, Any]) -> str:
    """What would settle a borderline verdict, as the report's page and the console both say it:
    ``about 120 more requests, or 24 s more at this step, would settle it``, or why it cannot be said."""
    more = verdict.get("settle_requests")
    if more is None:
        return "right at the limit: no number of requests settles it"
    secs = verdict.get("settle_seconds")
    return (f"about {more:,} more request{'s' if more != 1 else ''}"
            + (f", or {secs:g} s more at this step," if secs is not None else "") + " would settle it")
