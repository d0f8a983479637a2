"""Is a difference between two runs real, or within noise? Pure (numpy arrays in, verdicts out).

* Percentiles of latency samples (TTFT p95 of one step against the same step of another run): a
  seeded bootstrap of the difference. Each run's samples are resampled with replacement
  ``resamples`` times, the percentile taken of each, and the differences' central ``confidence``
  interval (99 % by default: a compare lines up many metrics and steps, and a 95 % interval would
  call one in twenty unchanged ones "real") is the interval of ``b − a``. The difference is
  *real* when the interval excludes 0.
* Throughput and capacity (one number per run): only repeats tell their noise. With at least two
  values per side, a Welch t-interval of the difference of the means at the same confidence;
  with fewer, the verdict is ``None`` (unknown), never "real".

Usage::

    d = percentile_difference(base_ttft, new_ttft, q=95)
    d.real, d.pct, d.low_pct, d.high_pct       # True, 10.2, 6.1, 14.0
    mean_difference([410, 402, 415], [380, 377, 390]).real
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

CONFIDENCE = 0.99
RESAMPLES = 1000
MIN_SAMPLES = 30  # fewer latency samples on a side: no verdict
MAX_SAMPLES = 5_000  # a larger side is subsampled (seeded) first: memory stays ~40 MB, the interval barely narrows

# Two-sided Student t quantiles (0.995) by degrees of freedom; past 30 the normal's 2.576.
_T995 = {1: 63.657, 2: 9.925, 3: 5.841, 4: 4.604, 5: 4.032, 6: 3.707, 7: 3.499, 8: 3.355, 9: 3.250, 10: 3.169,
         12: 3.055, 15: 2.947, 20: 2.845, 25: 2.787, 30: 2.750}
_T975 = {1: 12.706, 2: 4.303, 3: 3.182, 4: 2.776, 5: 2.571, 6: 2.447, 7: 2.365, 8: 2.306, 9: 2.262, 10: 2.228,
         12: 2.179, 15: 2.131, 20: 2.086, 25: 2.060, 30: 2.042}


@dataclass(frozen=True)
class Difference:
    """``b − a`` with its interval, in the metric's unit and in % of ``a``."""

    base: float | None
    value: float | None
    diff: float | None
    low: float | None
    high: float | None
    real: bool | None  # None: not enough data for a verdict
    method: str

    @property
    def pct(self) -> float | None:
        return None if self.diff is None or not self.base else 100.0 * self.diff / self.base

    @property
    def low_pct(self) -> float | None:
        return None if self.low is None or not self.base else 100.0 * self.low / self.base

    @property
    def high_pct(self) -> float | None:
        return None if self.high is None or not self.base else 100.0 * self.high / self.base

    def verdict(self) -> str:
        return {True: "real", False: "within noise", None: "no verdict"}[self.real]

    def to_json(self) -> dict:
        def r(v: float | None) -> float | None:
            return None if v is None else round(float(v), 4)

        return {"base": r(self.base), "value": r(self.value), "diff": r(self.diff), "low": r(self.low),
                "high": r(self.high), "pct": r(self.pct), "verdict": self.verdict(), "method": self.method}


def _clean(values: np.ndarray, rng: np.random.Generator) -> np.ndarray:
    v = np.asarray(values, dtype=float)
    v = v[~np.isnan(v)]
    if len(v) > MAX_SAMPLES:
        v = rng.choice(v, MAX_SAMPLES, replace=False)
    return v


def percentile_difference(a: np.ndarray, b: np.ndarray, q: float, confidence: float = CONFIDENCE,
                          resamples: int = RESAMPLES, seed: int = 0) -> Difference:
    """Bootstrap interval of ``percentile(b, q) − percentile(a, q)``."""
    rng = np.random.default_rng(seed)
    a, b = _clean(a, rng), _clean(b, rng)
    method = f"bootstrap ({resamples} resamples, {confidence:.0%} interval)"
    if min(len(a), len(b)) < MIN_SAMPLES:
        pa = float(np.percentile(a, q)) if len(a) else None
        pb = float(np.percentile(b, q)) if len(b) else None
        return Difference(pa, pb, None if pa is None or pb is None else pb - pa, None, None, None,
                          f"fewer than {MIN_SAMPLES} samples on a side")
    pa, pb = float(np.percentile(a, q)), float(np.percentile(b, q))
    boot_a = np.percentile(a[rng.integers(0, len(a), (resamples, len(a)))], q, axis=1)
    boot_b = np.percentile(b[rng.integers(0, len(b), (resamples, len(b)))], q, axis=1)
    tail = (1.0 - confidence) / 2.0
    low, high = np.quantile(boot_b - boot_a, [tail, 1.0 - tail])
    return Difference(pa, pb, pb - pa, float(low), float(high), bool(low > 0 or high < 0), method)


def _t(df: float, confidence: float) -> float:
    table = _T995 if confidence >= 0.99 else _T975
    keys = sorted(table)
    if df > keys[-1]:
        return 2.576 if confidence >= 0.99 else 1.96
    return table[next(k for k in keys if k >= math.floor(max(df, 1)))]


def mean_difference(a: list[float], b: list[float], confidence: float = CONFIDENCE) -> Difference:
    """Welch t-interval of ``mean(b) − mean(a)`` over repeats (one value per run)."""
    xa, xb = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    ma = float(xa.mean()) if len(xa) else None
    mb = float(xb.mean()) if len(xb) else None
    diff = None if ma is None or mb is None else mb - ma
    if min(len(xa), len(xb)) < 2:
        return Difference(ma, mb, diff, None, None, None, "one run a side: repeats tell the noise of throughput")
    va, vb = xa.var(ddof=1) / len(xa), xb.var(ddof=1) / len(xb)
    se = math.sqrt(va + vb)
    if se == 0:
        return Difference(ma, mb, diff, diff, diff, bool(diff), "repeats without spread")
    df = (va + vb) ** 2 / ((va ** 2 / (len(xa) - 1)) + (vb ** 2 / (len(xb) - 1)))
    half = _t(df, confidence) * se
    assert diff is not None
    return Difference(ma, mb, diff, diff - half, diff + half, bool(diff - half > 0 or diff + half < 0),
                      f"Welch t-interval over repeats ({confidence:.0%})")


def regression_beyond(d: Difference, pct: float, higher_is_worse: bool = True) -> bool:
    """A real difference whose point estimate is worse than ``a`` by more than ``pct`` %."""
    if not d.real or d.pct is None:
        return False
    return d.pct > pct if higher_is_worse else -d.pct > pct
