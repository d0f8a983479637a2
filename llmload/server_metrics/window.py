"""Maths over a time series of scrapes: rates, gauge summaries, per-window percentiles. Pure.

Inputs are plain lists with the scrape times passed in (``(t, value)`` points sorted by time);
nothing here reads a clock. A window ``[start, end]`` uses the scrapes taken inside it, both
ends included:

* **counter** → :func:`counter_increase` / :func:`counter_rate`: the rise from the first to the
  last scrape in the window, divided by the time between them (Prometheus' ``increase``/
  ``rate`` without the extrapolation to the window edges). A drop is a counter reset (server
  restart): the new value is what accrued since, as Prometheus counts it. Needs two scrapes.
* **gauge** → :func:`gauge_stats`: mean (of the scrapes, not time-weighted: scrapes are evenly
  spaced), max, min, last, and :func:`gauge_trend`, the least-squares slope per second.
* **histogram** → :func:`window_histogram`: bucket counts of the last scrape minus the first
  (a reset anywhere means the last scrape is taken whole), then :func:`histogram_quantile` with
  Prometheus' ``histogram_quantile`` rules: linear interpolation inside the bucket, 0 as the
  lower edge of the first bucket when its bound is positive, the highest finite bound when the
  rank lands in the ``+Inf`` bucket, no answer (None) without observations.
* **prefix-cache hit rate** → :func:`hit_rate`: hits' increase over queries' increase.

Non-finite values (NaN, ±Inf) in counter and gauge points are skipped.
:func:`~llmload.server_metrics.step_stats.aggregate_step` puts it together for one load step.

Usage::

    rate = counter_rate([(0.0, 100.0), (2.0, 160.0), (4.0, 230.0)], 0.0, 4.0)      # 32.5 /s
    buckets = window_histogram(ttft_points, start, end)
    p95 = histogram_quantile(0.95, buckets)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

Point = tuple[float, float]
Buckets = tuple[tuple[float, float], ...]
QUANTILES = {"p50": 0.5, "p90": 0.9, "p95": 0.95, "p99": 0.99}


def _in_window(points: Sequence[tuple[float, Any]], start: float, end: float) -> list[tuple[float, Any]]:
    return [p for p in points if start <= p[0] <= end]


def _finite(points: Sequence[Point], start: float, end: float) -> list[Point]:
    return [(t, v) for t, v in _in_window(points, start, end) if math.isfinite(v)]


def counter_increase(points: Sequence[Point], start: float, end: float) -> float | None:
    """How much a counter rose between the first and last scrape in the window (resets handled)."""
    pts = _finite(points, start, end)
    if len(pts) < 2:
        return None
    total = 0.0
    for (_, prev), (_, cur) in zip(pts, pts[1:], strict=False):
        total += cur - prev if cur >= prev else cur
    return total


def counter_rate(points: Sequence[Point], start: float, end: float) -> float | None:
    """Per-second rate of a counter over the window, or None with fewer than two scrapes."""
    pts = _finite(points, start, end)
    if len(pts) < 2 or pts[-1][0] <= pts[0][0]:
        return None
    increase = counter_increase(pts, start, end)
    return None if increase is None else increase / (pts[-1][0] - pts[0][0])


@dataclass(frozen=True, slots=True)
class GaugeStats:
    mean: float
    max: float
    min: float
    last: float
    n: int
    median: float = math.nan


def gauge_stats(points: Sequence[Point], start: float, end: float) -> GaugeStats | None:
    """Mean, max, min and last value of a gauge's scrapes in the window."""
    values = [v for _, v in _finite(points, start, end)]
    if not values:
        return None
    ordered = sorted(values)
    mid = len(ordered) // 2
    median = ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2
    return GaugeStats(sum(values) / len(values), max(values), min(values), values[-1], len(values), median)


def gauge_trend(points: Sequence[Point], start: float, end: float) -> float | None:
    """Least-squares slope of a gauge in units per second (e.g. waiting requests added per second)."""
    pts = _finite(points, start, end)
    if len(pts) < 2:
        return None
    n = len(pts)
    mean_t = sum(t for t, _ in pts) / n
    mean_v = sum(v for _, v in pts) / n
    var_t = sum((t - mean_t) ** 2 for t, _ in pts)
    if var_t == 0:
        return None
    return sum((t - mean_t) * (v - mean_v) for t, v in pts) / var_t


def histogram_delta(first: Buckets, last: Buckets) -> Buckets:
    """Bucket counts observed between two scrapes of one histogram (cumulative, like the input).

    When a count went down (the server restarted) or the bucket bounds changed, the last scrape
    is returned whole: what it holds accrued since the restart.
    """
    before = dict(first)
    if set(before) != {le for le, _ in last} or any(c < before[le] for le, c in last):
        return tuple(last)
    return tuple((le, c - before[le]) for le, c in last)


def _locate(q: float, buckets: Buckets) -> tuple[list[float], list[float], int, float] | None:
    """Prometheus' bucket search: the merged bounds, their monotone cumulative counts, the index of
    the bucket the q-quantile's rank falls in, and that rank; None without observations."""
    if not buckets or not 0 <= q <= 1:
        return None
    merged: dict[float, float] = {}
    for le, count in buckets:  # duplicate bounds count once (Prometheus' coalesceBuckets)
        merged[le] = merged.get(le, 0.0) + count
    ordered = sorted(merged.items())
    if ordered[-1][0] != math.inf or len(ordered) < 2:
        return None
    bounds = [le for le, _ in ordered]
    counts: list[float] = []
    for _, c in ordered:  # cumulative counts must not decrease (ensureMonotonic)
        counts.append(max(c, counts[-1]) if counts else c)
    total = counts[-1]
    if total <= 0:
        return None
    rank = q * total
    return bounds, counts, next((i for i in range(len(counts) - 1) if counts[i] >= rank), len(counts) - 1), rank


def histogram_quantile(q: float, buckets: Buckets) -> float | None:
    """The q-quantile (0..1) of cumulative ``(upper bound, count)`` buckets, as Prometheus does it.

    None when there are no observations or no ``+Inf`` bucket.
    """
    found = _locate(q, buckets)
    if found is None:
        return None
    bounds, counts, b, rank = found
    if b == len(counts) - 1:
        return bounds[-2]
    if b == 0 and bounds[0] <= 0:
        return bounds[0]
    lower = bounds[b - 1] if b > 0 else 0.0
    below = counts[b - 1] if b > 0 else 0.0
    in_bucket = counts[b] - below
    if in_bucket <= 0:
        return lower
    return lower + (bounds[b] - lower) * (rank - below) / in_bucket


def histogram_bounds(q: float, buckets: Buckets) -> tuple[float, float] | None:
    """The bounds of the bucket the q-quantile lies in: how coarse :func:`histogram_quantile`'s
    interpolated answer is (the true quantile of the observations is somewhere between them).
    The upper bound is ``inf`` when the rank lands in the ``+Inf`` bucket."""
    found = _locate(q, buckets)
    if found is None:
        return None
    bounds, _, b, _ = found
    return (bounds[b - 1] if b > 0 else 0.0 if bounds[0] > 0 else -math.inf), bounds[b]


def window_histogram(points: Sequence[tuple[float, Buckets]], start: float, end: float) -> Buckets | None:
    """Bucket counts observed in the window: the last scrape in it minus the first."""
    pts = _in_window(points, start, end)
    if len(pts) < 2:
        return None
    return histogram_delta(pts[0][1], pts[-1][1])


def window_quantiles(points: Sequence[tuple[float, Buckets]], start: float, end: float,
                     quantiles: dict[str, float] | None = None) -> dict[str, float | None] | None:
    """``{"p50": ..., "p90": ..., "p95": ..., "p99": ...}`` of the observations made in the window."""
    buckets = window_histogram(points, start, end)
    if buckets is None or buckets[-1][1] <= 0:
        return None
    return {name: histogram_quantile(q, buckets) for name, q in (quantiles or QUANTILES).items()}


def hit_rate(hits: Sequence[Point], queries: Sequence[Point], start: float, end: float) -> float | None:
    """Prefix-cache hit rate in the window: hits' increase ÷ queries' increase.

    A hits counter with no points counts as 0 (SGLang and TensorRT-LLM create it at the first
    hit); None when no query was counted in the window.
    """
    asked = counter_increase(queries, start, end)
    if not asked or asked <= 0:
        return None
    found = counter_increase(hits, start, end) if hits else 0.0
    return None if found is None else found / asked
