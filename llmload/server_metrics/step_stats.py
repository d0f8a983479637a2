"""What the server said during one load step: :func:`aggregate_step` summarises the scrapes
taken inside a step's window into the :class:`StepServerStats` that ``verdict.py`` and the
report read. Pure; the maths over the series is ``window.py``'s.

Every delta (counters, histograms) runs from the first to the last scrape inside the window:
``first_scrape`` and ``last_scrape`` say which, so a comparison with the client's rows can count
the same requests (``llmload.report.server_join``).

Usage::

    stats = aggregate_step([(t, snapshot(parse_exposition(body))) ...], start, end)
    stats.ttft_mean_ms, stats.ttft_count, stats.kv_usage_max
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, field

from llmload.server_metrics.known import HistogramSnapshot, ServerSnapshot
from llmload.server_metrics.window import (
    QUANTILES,
    Buckets,
    Point,
    counter_increase,
    counter_rate,
    gauge_stats,
    gauge_trend,
    histogram_bounds,
    hit_rate,
    window_histogram,
    window_quantiles,
)

NOT_METRICS = ("start", "end", "engine", "scrapes", "first_scrape", "last_scrape")


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
    ttft_count: float | None = None
    """TTFTs the server observed between the first and the last scrape: the requests whose first
    token it sent in between (what the client's side of the comparison must count too)."""
    ttft_ms: dict[str, float | None] | None = field(default=None)
    ttft_bounds_ms: dict[str, tuple[float, float]] | None = field(default=None)
    """The bucket each interpolated TTFT percentile lies in (upper ``inf`` in the ``+Inf`` bucket)."""
    e2e_mean_ms: float | None = None
    e2e_count: float | None = None
    first_scrape: float | None = None
    """The times of the scrapes that bound every delta and histogram window of the step."""
    last_scrape: float | None = None
    itl_ms: dict[str, float | None] | None = field(default=None)
    queue_time_ms: dict[str, float | None] | None = field(default=None)
    e2e_ms: dict[str, float | None] | None = field(default=None)

    def has_metrics(self) -> bool:
        """Whether any server number was measured in this step."""
        return any(v is not None for k, v in asdict(self).items() if k not in NOT_METRICS)


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
    found = window_sum_count(snaps, name)
    return None if found is None else found[0] / found[1]


def window_sum_count(snaps: Sequence[tuple[float, ServerSnapshot]], name: str) -> tuple[float, float] | None:
    """A histogram's ``_sum`` and ``_count`` added between the first and last scrape; None when
    nothing was observed (or the server restarted in between)."""
    pts = [(s.histograms[name].sum, s.histograms[name].count) for _, s in snaps if name in s.histograms]
    if len(snaps) < 2 or not pts:
        return None
    first = pts[0] if name in snaps[0][1].histograms else (0.0, 0.0)  # created later: it was 0 before
    last = pts[-1]
    if last[1] <= first[1] or last[0] < first[0]:  # nothing observed, or a reset
        return None
    return last[0] - first[0], last[1] - first[1]


def _window_bounds_ms(points: Sequence[tuple[float, Buckets]], start: float,
                      end: float) -> dict[str, tuple[float, float]] | None:
    buckets = window_histogram(points, start, end)
    if buckets is None:
        return None
    out = {name: b for name in ("p50", "p95") if (b := histogram_bounds(QUANTILES[name], buckets)) is not None}
    return {k: (lo * 1000.0, hi * 1000.0) for k, (lo, hi) in out.items()} or None


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
    ttft, e2e = window_sum_count(inside, "server_ttft_seconds"), window_sum_count(inside, "server_e2e_seconds")
    ttft_points = _hist_points(inside, "server_ttft_seconds")
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
        ttft_mean_ms=None if ttft is None else ttft[0] / ttft[1] * 1000.0,
        ttft_count=None if ttft is None else ttft[1],
        ttft_ms=_ms(window_quantiles(ttft_points, start, end)),
        ttft_bounds_ms=_window_bounds_ms(ttft_points, start, end),
        e2e_mean_ms=None if e2e is None else e2e[0] / e2e[1] * 1000.0,
        e2e_count=None if e2e is None else e2e[1],
        first_scrape=inside[0][0] if inside else None, last_scrape=inside[-1][0] if inside else None,
        itl_ms=_ms(window_quantiles(_hist_points(inside, "server_itl_seconds"), start, end)),
        queue_time_ms=_ms(window_quantiles(_hist_points(inside, "server_queue_time_seconds"), start, end)),
        e2e_ms=_ms(window_quantiles(_hist_points(inside, "server_e2e_seconds"), start, end)),
    )
