"""Known engines' metrics → common names, per scrape. Pure.

Each engine names the same few facts differently; the verdict and the report read them under
one set of names. The tables (which metric of which engine, units, what each engine counts and
when) are in :mod:`llmload.server_metrics.engines`; this module applies them to one scrape.

Anything not in the tables is kept under its own name (:func:`map_samples`), except
``*_created`` samples of counters and histograms (creation timestamps from prometheus_client).

Usage::

    exposition = parse_exposition(body)
    engine = detect_engine(exposition)              # "vllm", "sglang", "tgi", "llamacpp", "trtllm" or None
    rows = map_samples(exposition, engine)          # for PREFIX_server_metrics.csv
    snap = snapshot(exposition, engine)             # for window.py: combined per common name
    snap.gauges["requests_waiting"], snap.counters["generation_tokens"]
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from llmload.server_metrics.engines import (
    COMMON,
    COUNTER,
    DEFAULT_PATHS,
    ENGINES,
    GAUGE,
    HISTOGRAM,
    ITL_MEANING,
    CommonMetric,
    EngineMetrics,
    Source,
)
from llmload.server_metrics.parse import Exposition, Labels

__all__ = ["COMMON", "DEFAULT_PATHS", "ENGINES", "ITL_MEANING", "CommonMetric", "EngineMetrics", "HistogramSnapshot",
           "MappedSample", "ServerSnapshot", "Source", "combine_values", "detect_engine", "map_samples",
           "snapshot"]


@dataclass(frozen=True, slots=True)
class MappedSample:
    """One row of ``PREFIX_server_metrics.csv`` (without time and endpoint)."""

    metric: str
    labels: Labels
    value: float


@dataclass(frozen=True, slots=True)
class HistogramSnapshot:
    buckets: tuple[tuple[float, float], ...]
    """``(upper bound, cumulative count)`` ascending; the last bound is ``inf``."""
    count: float
    sum: float


@dataclass(frozen=True, slots=True)
class ServerSnapshot:
    """One scrape under common names, label sets combined."""

    engine: str | None
    gauges: dict[str, float] = field(default_factory=dict)
    counters: dict[str, float] = field(default_factory=dict)
    histograms: dict[str, HistogramSnapshot] = field(default_factory=dict)


def detect_engine(exposition: Exposition) -> str | None:
    """The known engine most of the sample names belong to, or None."""
    counts: dict[str, int] = defaultdict(int)
    for name, _ in exposition.samples:
        for spec in ENGINES.values():
            if name.startswith(spec.prefix):
                counts[spec.engine] += 1
    return max(counts, key=lambda e: counts[e]) if counts else None


class _Index:
    """Sample name → [(labels, value)], built once per exposition."""

    def __init__(self, exposition: Exposition, keep: Mapping[str, str] | None) -> None:
        self.by_name: dict[str, list[tuple[Labels, float]]] = defaultdict(list)
        for (name, labels), value in exposition.samples.items():
            if keep and any(k in keep and v != keep[k] for k, v in labels):
                continue
            self.by_name[name].append((labels, value))

    def names_of(self, source: Source) -> tuple[str, ...]:
        """The sample names a source reads, as present in this scrape (empty when absent)."""
        n = source.name
        if source.kind == COUNTER:
            found = [c for c in (n + "_total", n) if c in self.by_name]
            return tuple(found[:1])
        if source.kind == HISTOGRAM:
            return tuple(c for c in (n + "_bucket", n + "_sum", n + "_count") if c in self.by_name) \
                if n + "_bucket" in self.by_name else ()
        if source.kind == "histogram_sum":
            return (n + "_sum",) if n + "_sum" in self.by_name else ()
        if source.kind == "ratio":
            return (n, source.denominator) if n in self.by_name and source.denominator in self.by_name else ()
        if source.kind == "counter_sum":
            first, second = self.names_of(Source(n, COUNTER)), self.names_of(Source(source.denominator, COUNTER))
            return first + second if first and second else ()
        return (n,) if n in self.by_name else ()

    def pick(self, alternatives: tuple[Source, ...]) -> tuple[Source | None, tuple[str, ...]]:
        """The first alternative present, and the sample names it uses."""
        for source in alternatives:
            names = self.names_of(source)
            if names:
                return source, names
        return None, ()


def _ratio_rows(index: _Index, source: Source) -> list[tuple[Labels, float]]:
    denominators = dict(index.by_name[source.denominator])
    rows = []
    for labels, value in index.by_name[source.name]:
        d = denominators.get(labels)
        if d and math.isfinite(d) and d > 0:
            rows.append((labels, value / d))
    return rows


def _sum_rows(index: _Index, names: tuple[str, ...]) -> list[tuple[Labels, float]]:
    """Two counters added up, label set by label set (a label set missing from one counts as 0)."""
    total: dict[Labels, float] = defaultdict(float)
    for name in names:
        for labels, value in index.by_name[name]:
            total[labels] += value
    return list(total.items())


def _is_created(exposition: Exposition, name: str) -> bool:
    """A counter's or histogram's creation timestamp (prometheus_client declares it a gauge)."""
    return name.endswith("_created") and exposition.kind(name[: -len("_created")]) in (COUNTER, HISTOGRAM, "summary")


def map_samples(exposition: Exposition, engine: str | None = None,
                labels: Mapping[str, str] | None = None) -> list[MappedSample]:
    """Every sample, known ones renamed to common names, the rest under their own names.

    Histograms keep their ``_bucket``/``_sum``/``_count`` suffixes and ``le`` label under the
    common name (``server_ttft_seconds_bucket``). ``labels`` keeps only series that carry no
    other value for those labels (e.g. ``{"model_name": "llama"}`` on a multi-model server).
    """
    index = _Index(exposition, labels)
    spec = ENGINES.get(engine) if engine else None
    rows: list[MappedSample] = []
    consumed: set[str] = set()
    if spec is not None:
        for common, alternatives in spec.sources.items():
            chosen, names = index.pick(alternatives)
            for alt in alternatives:  # the ones not chosen duplicate the chosen one: drop them
                if alt is not chosen and alt.kind not in ("histogram_sum", "ratio", "counter_sum"):
                    consumed.update(n for n in index.names_of(alt) if n not in names)
            if chosen is None:
                continue
            if chosen.kind in ("ratio", "counter_sum"):
                derived = _ratio_rows(index, chosen) if chosen.kind == "ratio" else _sum_rows(index, names)
                rows += [MappedSample(common, lab, v) for lab, v in derived]
                continue  # the samples it comes from stay as raw rows too
            if chosen.kind == "histogram_sum":
                rows += [MappedSample(common, lab, v) for lab, v in index.by_name[names[0]]]
                continue  # the histogram stays as raw rows too
            consumed.update(names)
            for name in names:
                suffix = name[len(chosen.name):] if chosen.kind == HISTOGRAM else ""
                rows += [MappedSample(common + suffix, lab, v) for lab, v in index.by_name[name]]
    for name, series in index.by_name.items():
        if name in consumed or _is_created(exposition, name):
            continue
        rows += [MappedSample(name, lab, v) for lab, v in series]
    return rows


def combine_values(values: list[float], how: str) -> float | None:
    values = [v for v in values if not math.isnan(v)]
    if not values:
        return None
    if how == "max":
        return max(values)
    if how == "mean":
        return sum(values) / len(values)
    return sum(values)


def _histogram(index: _Index, base: str) -> HistogramSnapshot | None:
    per_le: dict[float, float] = defaultdict(float)
    for labels, value in index.by_name.get(base + "_bucket", ()):
        le = dict(labels).get("le")
        if le is None:
            continue
        try:
            bound = float(le)
        except ValueError:
            continue
        per_le[bound] += value
    if not per_le or math.inf not in per_le:
        return None
    count = sum(v for _, v in index.by_name.get(base + "_count", ())) or per_le[math.inf]
    total = sum(v for _, v in index.by_name.get(base + "_sum", ()))
    return HistogramSnapshot(tuple(sorted(per_le.items())), count, total)


def snapshot(exposition: Exposition, engine: str | None = None,
             labels: Mapping[str, str] | None = None) -> ServerSnapshot:
    """The common metrics of one scrape, each label set combined (see the table above).

    ``engine`` defaults to :func:`detect_engine`; an unknown engine gives an empty snapshot.
    """
    engine = engine or detect_engine(exposition)
    spec = ENGINES.get(engine) if engine else None
    snap = ServerSnapshot(engine)
    if spec is None:
        return snap
    index = _Index(exposition, labels)
    for common, alternatives in spec.sources.items():
        chosen, names = index.pick(alternatives)
        if chosen is None:
            continue
        kind = COMMON[common].kind
        if kind == HISTOGRAM:
            hist = _histogram(index, chosen.name)
            if hist is not None:
                snap.histograms[common] = hist
            continue
        if chosen.kind == "ratio":
            values = [v for _, v in _ratio_rows(index, chosen)]
        elif chosen.kind == "counter_sum":
            values = [v for _, v in _sum_rows(index, names)]
        else:
            values = [v for _, v in index.by_name[names[0]]]
        value = combine_values(values, COMMON[common].combine if kind == GAUGE else "sum")
        if value is None:
            continue
        (snap.gauges if kind == GAUGE else snap.counters)[common] = value
    return snap
