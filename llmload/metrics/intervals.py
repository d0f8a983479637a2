"""95 % intervals of a sample's percentile and mean. Pure numpy; the report's verdicts
(:mod:`llmload.metrics.confidence`) and the step shape's precision stop (:mod:`llmload.shapes.precision`)
both use these, so a step the shape ended as "known to 5 %" shows that interval in the report.

* A percentile's interval is a distribution-free order-statistic one: with n sorted samples, the
  number of samples below the true q-quantile is Binomial(n, q), so ``[x_(l), x_(u)]`` (1-based
  ranks) with l = ⌊nq + ½ − z·√(nq(1−q))⌋ and u = ⌈nq + ½ + z·√(nq(1−q))⌉ (normal approximation
  with continuity correction, z = 1.96) holds it 95 % of the time, whatever the distribution. A
  rank outside 1..n leaves that side open (None): 30 samples cannot bound a p95 from above, and it
  takes ~72.
* A mean's interval is mean ± z·s/√n (None below two samples).

Usage::

    quantile_ci(np.arange(1.0, 101.0), 95)      # (91.0, 100.0)
    mean_ci(np.array([1.0, 2.0, 3.0]))          # (0.868..., 3.131...)
"""

from __future__ import annotations

import math

import numpy as np

Z95 = 1.959964


def quantile_ci(values: np.ndarray, q: float, z: float = Z95,
                presorted: bool = False) -> tuple[float | None, float | None]:
    """95 % interval of the ``q``-th percentile (0..100) of ``values`` (NaN-free); None: open side.
    ``presorted``: ``values`` are sorted already (the report sorts a step's once for all its percentiles)."""
    n = len(values)
    if not n:
        return None, None
    p = q / 100.0
    half = z * math.sqrt(n * p * (1.0 - p))
    lo_rank = math.floor(n * p + 0.5 - half)
    hi_rank = math.ceil(n * p + 0.5 + half)
    ranks = [r - 1 for r in (lo_rank, hi_rank) if 1 <= r <= n]
    got = values if presorted or not ranks else np.partition(values, ranks)
    lo = float(got[lo_rank - 1]) if 1 <= lo_rank <= n else None
    hi = float(got[hi_rank - 1]) if 1 <= hi_rank <= n else None
    return lo, hi


def mean_ci(values: np.ndarray, z: float = Z95) -> tuple[float | None, float | None]:
    n = len(values)
    if n < 2:
        return None, None
    m, s = float(values.mean()), float(values.std(ddof=1))
    return m - z * s / math.sqrt(n), m + z * s / math.sqrt(n)
