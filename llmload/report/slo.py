"""An SLO's value over one step's request rows (numpy). The SLO model itself is :mod:`llmload.slo`.

A step meets an SLO when its value is ≤ the limit. Per request (for goodput) a latency SLO holds
when that request's own value is ≤ the limit.
"""

from __future__ import annotations

import numpy as np

from llmload.slo import ERROR_RATE, SLO


def step_value(slo: SLO, values: np.ndarray, errors: int, finished: int) -> float:
    """The SLO's metric over one step: ``values`` the ok requests' column, ``errors`` and
    ``finished`` the step's counts (cancelled excluded). NaN when there is nothing to measure."""
    if slo.metric == ERROR_RATE:
        return errors / finished if finished else float("nan")
    values = values[~np.isnan(values)]
    if not len(values):
        return float("nan")
    q = slo.quantile
    if q is None:
        return float(values.mean())
    return float(np.percentile(values, q))
