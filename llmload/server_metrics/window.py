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

Non-finite values (NaN, ±Inf) in counter and gauge points are skipped. :func:`aggregate_step`
puts it together for one load step from :class:`~llmload.server_metrics.known.ServerSnapshot`
scrapes; its :class:`StepServerStats` is what ``verdict.py`` reads.

Usage::

    rate = counter_rate([(0.0, 100.0), (2.0, 160.0), (4.0, 230.0)], 0.0, 4.0)      # 32.5 /s
    buckets = window_histogram(ttft_points, start, end)
    p95 = histogram_quantile(0.95, buckets)
    stats = aggregate_step([(t, snapshot(parse_exposition(body))) ...], start, end)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

from llmload.server_metrics.known import HistogramSnapshot, ServerSnapshot

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


def histogram_quantile(q: float, buckets: Buckets) -> float | None:
    """The q-quantile (0..1) of cumulative ``(upper bound, count)`` buckets, as Prometheus does it.

    None when there are no observations or no ``+Inf`` bucket.
    """
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
    b = next((i for i in range(len(counts) - 1) if counts[i] >= rank), len(counts) - 1)
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


@dataclass(frozen=True, slots=True)
class StepServerStats:
    """What the server said during one load step (times in ms, rates per second)."""

    start: float
    end: float
    engine: str | None = None
    scrapes: int = 0
    kv_usage_mean: float | None = None
    kv_usage_max: float | None = None
    running_mean: float | None = None
    running_max: float | None = None
    waiting_mean: float | None = None
    waiting_median: float | None = None
    """Robust to one scrape that caught a burst of arrivals waiting for the next engine step."""
    waiting_max: float | None = None
    waiting_trend_per_s: float | None = None
    preemptions: float | None = None
    prompt_tps: float | None = None
    generation_tps: float | None = None
    prefix_cache_hit_rate: float | None = None
    spec_accept_rate: float | None = None
    """Speculative decoding: accepted ÷ draft tokens over the step (vLLM's counters; SGLang's gauge mean)."""
    spec_accept_length: float | None = None
    """Tokens per decode step with a draft, the bonus token included: 1 + accepted ÷ drafts."""
    ttft_mean_ms: float | None = None
    """From the histogram's ``_sum`` and ``_count``: exact, unlike the bucket-interpolated percentiles."""
    ttft_ms: dict[str, float | None] | None = field(default=None)
    itl_ms: dict[str, float | None] | None = field(default=None)
    queue_time_ms: dict[str, float | None] | None = field(default=None)
    e2e_ms: dict[str, float | None] | None = field(default=None)

    def has_metrics(self) -> bool:
        """Whether any server number was measured in this step."""
        return any(v is not None for k, v in asdict(self).items() if k not in ("start", "end", "engine", "scrapes"))


def _gauge_points(snaps: Sequence[tuple[float, ServerSnapshot]], name: str) -> list[Point]:
    return [(t, s.gauges[name]) for t, s in snaps if name in s.gauges]


def _counter_points(snaps: Sequence[tuple[float, ServerSnapshot]], name: str) -> list[Point]:
    """A counter's points; scrapes before it first appears count as 0.

    Servers create some series lazily (SGLang's ``sglang:cached_tokens_total`` at the first
    cache hit) and never remove one, so "not there yet" means "still zero".
    """
    first = next((i for i, (_, s) in enumerate(snaps) if name in s.counters), None)
    if first is None:
        return []
    return [(t, 0.0) for t, _ in snaps[:first]] + [(t, s.counters[name]) for t, s in snaps[first:]
                                                     if name in s.counters]


def _hist_points(snaps: Sequence[tuple[float, ServerSnapshot]], name: str) -> list[tuple[float, Buckets]]:
    """A histogram's bucket points; like counters, empty before it first appears."""
    first = next((i for i, (_, s) in enumerate(snaps) if name in s.histograms), None)
    if first is None:
        return []
    empty = tuple((le, 0.0) for le, _ in snaps[first][1].histograms[name].buckets)
    out: list[tuple[float, Buckets]] = [(t, empty) for t, _ in snaps[:first]]
    for t, s in snaps[first:]:
        h: HistogramSnapshot | None = s.histograms.get(name)
        if h is not None:
            out.append((t, h.buckets))
    return out


def window_mean(snaps: Sequence[tuple[float, ServerSnapshot]], name: str) -> float | None:
    """Mean of a histogram's observations between the first and last scrape (its sum and count)."""
    pts = [(s.histograms[name].sum, s.histograms[name].count) for _, s in snaps if name in s.histograms]
    if len(snaps) < 2 or not pts:
        return None
    first = pts[0] if name in snaps[0][1].histograms else (0.0, 0.0)  # created later: it was 0 before
    last = pts[-1]
    if last[1] <= first[1] or last[0] < first[0]:  # nothing observed, or a reset
        return None
    return (last[0] - first[0]) / (last[1] - first[1])


def _ms(quantiles: dict[str, float | None] | None) -> dict[str, float | None] | None:
    if quantiles is None:
        return None
    return {k: None if v is None else v * 1000.0 for k, v in quantiles.items()}


def aggregate_step(snaps: Sequence[tuple[float, ServerSnapshot]], start: float, end: float) -> StepServerStats:
    """Summarise the scrapes taken in ``[start, end]`` for :func:`verdict.server_verdict`."""
    inside = [(t, s) for t, s in snaps if start <= t <= end]
    engine = next((s.engine for _, s in inside if s.engine), None)
    kv = gauge_stats(_gauge_points(inside, "kv_cache_usage"), start, end)
    running = gauge_stats(_gauge_points(inside, "requests_running"), start, end)
    waiting_points = _gauge_points(inside, "requests_waiting")
    waiting = gauge_stats(waiting_points, start, end)
    rate = hit_rate(_counter_points(inside, "prefix_cache_hits_tokens"),
                    _counter_points(inside, "prefix_cache_queries_tokens"), start, end)
    if rate is None:
        gauge = gauge_stats(_gauge_points(inside, "prefix_cache_hit_rate"), start, end)
        rate = gauge.mean if gauge else None
    accepted = counter_increase(_counter_points(inside, "spec_accepted_tokens"), start, end)
    drafted = counter_increase(_counter_points(inside, "spec_draft_tokens"), start, end)
    drafts = counter_increase(_counter_points(inside, "spec_drafts"), start, end)
    accept_rate = accepted / drafted if accepted is not None and drafted else None
    accept_length = 1.0 + accepted / drafts if accepted is not None and drafts else None
    if accept_rate is None and (g := gauge_stats(_gauge_points(inside, "spec_accept_rate"), start, end)):
        accept_rate = g.mean
    if accept_length is None and (g := gauge_stats(_gauge_points(inside, "spec_accept_length"), start, end)):
        accept_length = g.mean
    return StepServerStats(
        start=start, end=end, engine=engine, scrapes=len(inside),
        spec_accept_rate=accept_rate, spec_accept_length=accept_length,
        kv_usage_mean=kv.mean if kv else None, kv_usage_max=kv.max if kv else None,
        running_mean=running.mean if running else None, running_max=running.max if running else None,
        waiting_mean=waiting.mean if waiting else None, waiting_max=waiting.max if waiting else None,
        waiting_median=waiting.median if waiting else None,
        waiting_trend_per_s=gauge_trend(waiting_points, start, end),
        preemptions=counter_increase(_counter_points(inside, "preemptions"), start, end),
        prompt_tps=counter_rate(_counter_points(inside, "prompt_tokens"), start, end),
        generation_tps=counter_rate(_counter_points(inside, "generation_tokens"), start, end),
        prefix_cache_hit_rate=rate,
        ttft_mean_ms=None if (mean := window_mean(inside, "server_ttft_seconds")) is None else mean * 1000.0,
        ttft_ms=_ms(window_quantiles(_hist_points(inside, "server_ttft_seconds"), start, end)),
        itl_ms=_ms(window_quantiles(_hist_points(inside, "server_itl_seconds"), start, end)),
        queue_time_ms=_ms(window_quantiles(_hist_points(inside, "server_queue_time_seconds"), start, end)),
        e2e_ms=_ms(window_quantiles(_hist_points(inside, "server_e2e_seconds"), start, end)),
    )
