"""Scrapes over time, as the CSV, the live view and the report need them. Pure (times passed in).

* **CSV rows** (``PREFIX_server_metrics.csv``, long format ``time,endpoint,metric,labels,value``):
  :func:`csv_rows`. ``time`` is when the scrape tick started (every endpoint of one tick shares
  it, so a fleet's scrapes line up); ``labels`` is Prometheus' own text, ``engine="0",le="0.5"``.
  Every common metric is written whole (histogram buckets too: the report's percentiles come
  from them), and so is every other gauge, counter and summary. The one thing left out is the
  ``_bucket`` series of histograms outside the common set: their ``_sum`` and ``_count`` stay
  (so a mean is still there), but their buckets are most of a body and nothing reads them
  (TGI's ``tgi_batch_next_size`` alone has 1,024). That takes the fixtures' TGI scrape from
  1,702 rows to 160, and vLLM's (two engines) from 506 to 256. Each scrape also gets ``up``
  (1, or 0 when it failed; ``engine`` label) and ``scrape_duration_seconds`` rows, as
  Prometheus records them.
* **Rebuilding** one scrape's common metrics from its CSV rows: :func:`snapshot_from_rows`.
* **A fleet as one server**: :func:`combine` adds endpoints up (gauges by their ``combine``
  rule: KV usage is the fullest endpoint's), :class:`FleetSeries` lines ticks up, carrying an
  endpoint's last good scrape over a failed one so a counter does not seem to reset.
* **The live view**: :func:`live_point`, the latest gauges plus rates, hit rate and server TTFT
  over the last ``window_s`` seconds (the mean is exact, from the histogram's sum and count; the
  percentiles are interpolated inside its buckets, so a 40 ms TTFT in vLLM's (20, 40] ms bucket
  reads as a p50 of 30 ms).

Usage::

    rows = csv_rows(tick_time, url, map_samples(exposition, engine), engine=engine, duration_s=0.012)
    fleet = FleetSeries()
    fleet.add(tick_time, {url: snapshot(exposition, engine), other_url: None})   # None: failed
    point = live_point(fleet.points, now)        # {"running": 12.0, "kv_usage_pct": 41.0, ...}
"""

from __future__ import annotations

import math
import re
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from llmload.files import SERVER_METRICS_COLUMNS
from llmload.server_metrics.known import (
    COMMON,
    GAUGE,
    HISTOGRAM,
    HistogramSnapshot,
    MappedSample,
    ServerSnapshot,
    combine_values,
)
from llmload.server_metrics.parse import Labels
from llmload.server_metrics.step_stats import aggregate_step

CSV_HEADER = SERVER_METRICS_COLUMNS  # time,endpoint,metric,labels,value (llmload.files)
UP, SCRAPE_DURATION = "up", "scrape_duration_seconds"
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')
_HIST_SUFFIXES = ("_bucket", "_sum", "_count")


def format_labels(labels: Labels | Mapping[str, str]) -> str:
    """``(("engine", "0"), ("le", "0.5"))`` → ``engine="0",le="0.5"`` (Prometheus' escaping)."""
    items = labels.items() if isinstance(labels, Mapping) else labels
    return ",".join(f'{k}="{_escape(v)}"' for k, v in items)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", lambda m: "\n" if m.group(1) == "n" else m.group(1), text)


def parse_labels(text: str) -> Labels:
    """The inverse of :func:`format_labels`, sorted by label name."""
    return tuple(sorted((k, _unescape(v)) for k, v in _LABEL.findall(text or "")))


def _value(v: float) -> float | int:
    return int(v) if math.isfinite(v) and v.is_integer() and abs(v) < 1e15 else v


def csv_rows(t: float, endpoint: str, mapped: Iterable[MappedSample], *, engine: str | None,
             duration_s: float) -> list[tuple[Any, ...]]:
    """The CSV rows of one successful scrape (see the module docstring for what is left out)."""
    when = round(t, 3)
    rows: list[tuple[Any, ...]] = [(when, endpoint, UP, f'engine="{engine or ""}"', 1),
                                   (when, endpoint, SCRAPE_DURATION, "", round(duration_s, 6))]
    for m in mapped:
        if m.metric.endswith("_bucket") and m.metric[:-7] not in COMMON and any(k == "le" for k, _ in m.labels):
            continue
        rows.append((when, endpoint, m.metric, format_labels(m.labels), _value(m.value)))
    return rows


def failed_rows(t: float, endpoint: str, duration_s: float) -> list[tuple[Any, ...]]:
    """The CSV rows of a failed scrape: ``up`` 0."""
    when = round(t, 3)
    return [(when, endpoint, UP, "", 0), (when, endpoint, SCRAPE_DURATION, "", round(duration_s, 6))]


def snapshot_from_rows(rows: Iterable[tuple[str, str, float]], engine: str | None = None) -> ServerSnapshot:
    """One scrape's common metrics from its CSV rows ``(metric, labels text, value)``, label sets
    combined as :func:`~llmload.server_metrics.known.snapshot` does."""
    gauges: dict[str, list[float]] = defaultdict(list)
    counters: dict[str, list[float]] = defaultdict(list)
    buckets: dict[str, dict[float, float]] = defaultdict(lambda: defaultdict(float))
    sums: dict[str, float] = defaultdict(float)
    counts: dict[str, float] = defaultdict(float)
    for metric, labels, value in rows:
        common = COMMON.get(metric)
        if common is not None:
            (gauges if common.kind == GAUGE else counters)[metric].append(float(value))
            continue
        base, _, suffix = metric.rpartition("_")
        if COMMON.get(base) is None or COMMON[base].kind != HISTOGRAM or "_" + suffix not in _HIST_SUFFIXES:
            continue
        if suffix == "bucket":
            le = dict(parse_labels(labels)).get("le")
            try:
                buckets[base][float(le)] += float(value)  # type: ignore[arg-type]
            except (TypeError, ValueError):
                continue
        elif suffix == "sum":
            sums[base] += float(value)
        else:
            counts[base] += float(value)
    snap = ServerSnapshot(engine)
    for name, values in gauges.items():
        v = combine_values(values, COMMON[name].combine)
        if v is not None:
            snap.gauges[name] = v
    for name, values in counters.items():
        v = combine_values(values, "sum")
        if v is not None:
            snap.counters[name] = v
    for name, per_le in buckets.items():
        if math.inf in per_le:
            snap.histograms[name] = HistogramSnapshot(tuple(sorted(per_le.items())),
                                                      counts.get(name) or per_le[math.inf], sums.get(name, 0.0))
    return snap


def combine(snaps: Sequence[ServerSnapshot]) -> ServerSnapshot:
    """Several endpoints' scrapes as one server. Histograms add up only where the bucket bounds
    are the same as the first endpoint's (one engine behind a load balancer)."""
    if len(snaps) == 1:
        return snaps[0]
    engines = {s.engine for s in snaps if s.engine}
    out = ServerSnapshot(engines.pop() if len(engines) == 1 else ("mixed" if engines else None))
    for name in {k for s in snaps for k in s.gauges}:
        v = combine_values([s.gauges[name] for s in snaps if name in s.gauges], COMMON[name].combine)
        if v is not None:
            out.gauges[name] = v
    for name in {k for s in snaps for k in s.counters}:
        out.counters[name] = sum(s.counters[name] for s in snaps if name in s.counters)
    for name in {k for s in snaps for k in s.histograms}:
        hists = [s.histograms[name] for s in snaps if name in s.histograms]
        bounds = [le for le, _ in hists[0].buckets]
        same = [h for h in hists if [le for le, _ in h.buckets] == bounds]
        out.histograms[name] = HistogramSnapshot(
            tuple((le, sum(h.buckets[i][1] for h in same)) for i, le in enumerate(bounds)),
            sum(h.count for h in same), sum(h.sum for h in same))
    return out


class FleetSeries:
    """Combined scrapes over time: one point per tick at which any endpoint has answered so far."""

    def __init__(self, keep: int | None = None) -> None:
        self.points: list[tuple[float, ServerSnapshot]] = []
        self.last: dict[str, ServerSnapshot] = {}
        self.answered: dict[str, bool] = {}
        """Endpoint → whether its latest scrape succeeded."""
        self._keep = keep

    def add(self, t: float, scrapes: Mapping[str, ServerSnapshot | None]) -> ServerSnapshot | None:
        """One tick: each endpoint's scrape, or None when it failed (its last good one stands in)."""
        for endpoint, snap in scrapes.items():
            self.answered[endpoint] = snap is not None
            if snap is not None:
                self.last[endpoint] = snap
        if not self.last:
            return None
        combined = combine(list(self.last.values()))
        self.points.append((t, combined))
        if self._keep is not None and len(self.points) > self._keep:
            del self.points[: len(self.points) - self._keep]
        return combined


def _round(v: float | None, digits: int) -> float | None:
    return None if v is None else round(v, digits)


def live_point(points: Sequence[tuple[float, ServerSnapshot]], now: float, window_s: float = 10.0,
               ) -> dict[str, Any] | None:
    """The live view's server sample: the newest gauges, and over ``[now − window_s, now]`` the
    token rate, the prefix-cache hit rate and the server's TTFT percentiles."""
    if not points:
        return None
    t, snap = points[-1]
    recent = [p for p in points if p[0] >= now - window_s]
    stats = aggregate_step(recent, now - window_s, now)
    kv = snap.gauges.get("kv_cache_usage")
    ttft = stats.ttft_ms or {}
    return {
        "time": round(t, 3), "engine": snap.engine,
        "running": snap.gauges.get("requests_running"), "waiting": snap.gauges.get("requests_waiting"),
        "kv_usage_pct": None if kv is None else round(kv * 100.0, 2),
        "prefix_hit_rate": _round(stats.prefix_cache_hit_rate, 4),
        "generation_tps": _round(stats.generation_tps, 1), "prompt_tps": _round(stats.prompt_tps, 1),
        "preemptions": stats.preemptions,
        "ttft_p50_ms": _round(ttft.get("p50"), 2), "ttft_p95_ms": _round(ttft.get("p95"), 2),
        "ttft_mean_ms": _round(stats.ttft_mean_ms, 2),
    }


__all__ = ["CSV_HEADER", "FleetSeries", "UP", "combine", "csv_rows", "failed_rows", "format_labels",
           "live_point", "parse_labels", "snapshot_from_rows"]
