"""Known engines' metrics → common names, per scrape. Pure.

Each engine names the same few facts differently; the verdict and the report read them under
one set of names. The tables below come from each project's own source (file and commit in
``tests/fixtures/metrics/SOURCES.md``).

=============================  =========  ==========  =======  ====================================
common name                    kind       unit        combine  meaning
=============================  =========  ==========  =======  ====================================
requests_running               gauge      requests    sum      in the running batch
requests_waiting               gauge      requests    sum      queued, not yet scheduled
kv_cache_usage                 gauge      ratio 0..1  max      KV cache in use (the fullest engine)
prefix_cache_hit_rate          gauge      ratio 0..1  mean     the engine's own hit-rate gauge
prefix_cache_queries_tokens    counter    tokens      sum      prompt tokens looked up in the cache
prefix_cache_hits_tokens       counter    tokens      sum      of which found cached
preemptions                    counter    requests    sum      preempted (vLLM) / retracted (SGLang)
prompt_tokens                  counter    tokens      sum      prompt (prefill) tokens
generation_tokens              counter    tokens      sum      generated tokens
server_ttft_seconds            histogram  s           sum      time to first token
server_itl_seconds             histogram  s           sum      inter-token latency or per-request TPOT
server_queue_time_seconds      histogram  s           sum      time waiting in the queue
server_e2e_seconds             histogram  s           sum      request latency inside the server
=============================  =========  ==========  =======  ====================================

"combine" is how the label sets of one scrape (vLLM's ``engine`` per data-parallel rank,
SGLang's ``dp_rank``, ...) fold into one number; histograms add up bucket by bucket.

**Units.** Every KV and hit-rate gauge is already a ratio 0..1, so nothing is rescaled. Beware
vLLM's ``vllm:kv_cache_usage_perc``: despite ``_perc`` its help text says "1 means 100 percent
usage". TGI has no KV gauge; ``kv_cache_usage`` is derived there as the running batch's
reserved tokens over the token budget (``tgi_batch_current_max_tokens /
tgi_batch_max_total_tokens``), an upper bound of real use. All durations are seconds already.

**What each engine counts, and when** (matters when comparing with the client, see
``verdict.token_rate_warning``): vLLM's token counters grow every engine step; SGLang,
TensorRT-LLM, TGI and llama.cpp add a request's tokens when it finishes (llama.cpp: prompt
tokens once its prefill is done). TGI has no token counters: the ``_sum`` of its per-request
histograms ``tgi_request_input_length`` and ``tgi_request_generated_tokens`` is used (input
length counted at validation, generated tokens only for successful requests). SGLang and
TensorRT-LLM have no prefix-cache "queries" counter: their prompt-token counter is the
denominator (both count finished requests only). ``server_itl_seconds`` is a per-token
inter-token latency for vLLM and SGLang, but a per-request mean time per output token for TGI
(``tgi_request_mean_time_per_token_duration``) and TensorRT-LLM
(``trtllm_time_per_output_token_seconds``): see ``ITL_MEANING``.

**Choice among names.** Where an engine renamed a metric, the alternatives are listed newest
first and the first one present in the scrape is used; the others are dropped as duplicates
(vLLM ≤ 0.10 exposes ``vllm:gpu_cache_usage_perc`` next to ``vllm:kv_cache_usage_perc`` with the
same value). vLLM ≤ 0.8 counted ``vllm:gpu_prefix_cache_*`` in blocks, not tokens: the hit rate
is still right, the two counters are then block counts.

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

from llmload.server_metrics.parse import Exposition, Labels

GAUGE, COUNTER, HISTOGRAM = "gauge", "counter", "histogram"


@dataclass(frozen=True, slots=True)
class CommonMetric:
    name: str
    kind: str
    unit: str
    combine: str  # "sum" | "max" | "mean" (gauges); counters and histograms always add up


COMMON: dict[str, CommonMetric] = {m.name: m for m in (
    CommonMetric("requests_running", GAUGE, "requests", "sum"),
    CommonMetric("requests_waiting", GAUGE, "requests", "sum"),
    CommonMetric("kv_cache_usage", GAUGE, "ratio", "max"),
    CommonMetric("prefix_cache_hit_rate", GAUGE, "ratio", "mean"),
    CommonMetric("prefix_cache_queries_tokens", COUNTER, "tokens", "sum"),
    CommonMetric("prefix_cache_hits_tokens", COUNTER, "tokens", "sum"),
    CommonMetric("preemptions", COUNTER, "requests", "sum"),
    CommonMetric("prompt_tokens", COUNTER, "tokens", "sum"),
    CommonMetric("generation_tokens", COUNTER, "tokens", "sum"),
    CommonMetric("server_ttft_seconds", HISTOGRAM, "s", "sum"),
    CommonMetric("server_itl_seconds", HISTOGRAM, "s", "sum"),
    CommonMetric("server_queue_time_seconds", HISTOGRAM, "s", "sum"),
    CommonMetric("server_e2e_seconds", HISTOGRAM, "s", "sum"),
)}


@dataclass(frozen=True, slots=True)
class Source:
    """Where one engine keeps a common metric.

    ``kind``: ``gauge``; ``counter`` (``name`` without ``_total``; both spellings match);
    ``histogram`` (``name`` without ``_bucket``/``_sum``/``_count``); ``histogram_sum`` (a
    histogram's ``_sum`` read as a counter); ``ratio`` (gauge ``name`` over gauge ``denominator``).
    """

    name: str
    kind: str
    denominator: str = ""


@dataclass(frozen=True, slots=True)
class EngineMetrics:
    engine: str
    prefix: str
    """Every metric of this engine starts with it (used to recognise the engine)."""
    path: str
    """Where the Prometheus text lives."""
    enable: str
    """What the server needs to expose it."""
    sources: dict[str, tuple[Source, ...]]
    """Common name → alternatives, newest first."""


def _g(name: str) -> Source:
    return Source(name, GAUGE)


def _c(name: str) -> Source:
    return Source(name, COUNTER)


def _h(name: str) -> Source:
    return Source(name, HISTOGRAM)


ENGINES: dict[str, EngineMetrics] = {e.engine: e for e in (
    EngineMetrics(
        "vllm", "vllm:", "/metrics", "on by default (vllm serve)", {
            "requests_running": (_g("vllm:num_requests_running"),),
            "requests_waiting": (_g("vllm:num_requests_waiting"),),
            "kv_cache_usage": (_g("vllm:kv_cache_usage_perc"), _g("vllm:gpu_cache_usage_perc")),
            "prefix_cache_queries_tokens": (_c("vllm:prefix_cache_queries"), _c("vllm:gpu_prefix_cache_queries")),
            "prefix_cache_hits_tokens": (_c("vllm:prefix_cache_hits"), _c("vllm:gpu_prefix_cache_hits")),
            "preemptions": (_c("vllm:num_preemptions"),),
            "prompt_tokens": (_c("vllm:prompt_tokens"),),
            "generation_tokens": (_c("vllm:generation_tokens"),),
            "server_ttft_seconds": (_h("vllm:time_to_first_token_seconds"),),
            "server_itl_seconds": (_h("vllm:inter_token_latency_seconds"), _h("vllm:time_per_output_token_seconds")),
            "server_queue_time_seconds": (_h("vllm:request_queue_time_seconds"),),
            "server_e2e_seconds": (_h("vllm:e2e_request_latency_seconds"),),
        }),
    EngineMetrics(
        "sglang", "sglang:", "/metrics", "--enable-metrics", {
            "requests_running": (_g("sglang:num_running_reqs"),),
            "requests_waiting": (_g("sglang:num_queue_reqs"),),
            "kv_cache_usage": (_g("sglang:token_usage"),),
            "prefix_cache_hit_rate": (_g("sglang:cache_hit_rate"),),
            "prefix_cache_queries_tokens": (_c("sglang:prompt_tokens"),),
            "prefix_cache_hits_tokens": (_c("sglang:cached_tokens"),),
            "preemptions": (_c("sglang:num_retracted_requests"),),
            "prompt_tokens": (_c("sglang:prompt_tokens"),),
            "generation_tokens": (_c("sglang:generation_tokens"),),
            "server_ttft_seconds": (_h("sglang:time_to_first_token_seconds"),),
            "server_itl_seconds": (_h("sglang:inter_token_latency_seconds"),),
            "server_queue_time_seconds": (_h("sglang:queue_time_seconds"),),
            "server_e2e_seconds": (_h("sglang:e2e_request_latency_seconds"),),
        }),
    EngineMetrics(
        "tgi", "tgi_", "/metrics", "on by default (text-generation-launcher)", {
            "requests_running": (_g("tgi_batch_current_size"),),
            "requests_waiting": (_g("tgi_queue_size"),),
            "kv_cache_usage": (Source("tgi_batch_current_max_tokens", "ratio", "tgi_batch_max_total_tokens"),),
            "prompt_tokens": (Source("tgi_request_input_length", "histogram_sum"),),
            "generation_tokens": (Source("tgi_request_generated_tokens", "histogram_sum"),),
            "server_itl_seconds": (_h("tgi_request_mean_time_per_token_duration"),),
            "server_queue_time_seconds": (_h("tgi_request_queue_duration"),),
            "server_e2e_seconds": (_h("tgi_request_duration"),),
        }),
    EngineMetrics(
        "llamacpp", "llamacpp:", "/metrics", "llama-server --metrics", {
            "requests_running": (_g("llamacpp:requests_processing"),),
            "requests_waiting": (_g("llamacpp:requests_deferred"),),
            # removed upstream in 2025 (ggml-org/llama.cpp#13660); older builds still have it
            "kv_cache_usage": (_g("llamacpp:kv_cache_usage_ratio"),),
            "prompt_tokens": (_c("llamacpp:prompt_tokens"),),
            "generation_tokens": (_c("llamacpp:tokens_predicted"),),
        }),
    EngineMetrics(
        "trtllm", "trtllm_", "/prometheus/metrics",
        "trtllm-serve with return_perf_metrics: true (and enable_iter_perf_stats: true for the gauges)", {
            "requests_running": (_g("trtllm_num_requests_running"),),
            "requests_waiting": (_g("trtllm_num_requests_waiting"),),
            "kv_cache_usage": (_g("trtllm_kv_cache_utilization"),),
            "prefix_cache_hit_rate": (_g("trtllm_kv_cache_hit_rate"),),
            "prefix_cache_queries_tokens": (_c("trtllm_prompt_tokens"),),
            "prefix_cache_hits_tokens": (_c("trtllm_prompt_cached_tokens"),),
            "prompt_tokens": (_c("trtllm_prompt_tokens"),),
            "generation_tokens": (_c("trtllm_generation_tokens"),),
            "server_ttft_seconds": (_h("trtllm_time_to_first_token_seconds"),),
            "server_itl_seconds": (_h("trtllm_time_per_output_token_seconds"),),
            "server_queue_time_seconds": (_h("trtllm_request_queue_time_seconds"),),
            "server_e2e_seconds": (_h("trtllm_e2e_request_latency_seconds"),),
        }),
)}

ITL_MEANING = {"vllm": "per token", "sglang": "per token", "tgi": "per-request mean", "trtllm": "per-request mean"}
"""What one ``server_itl_seconds`` observation is, per engine."""


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
                if alt is not chosen and alt.kind not in ("histogram_sum", "ratio"):
                    consumed.update(index.names_of(alt))
            if chosen is None:
                continue
            if chosen.kind == "ratio":
                rows += [MappedSample(common, lab, v) for lab, v in _ratio_rows(index, chosen)]
                continue  # its two gauges stay as raw rows too
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


def _combine(values: list[float], how: str) -> float | None:
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
        else:
            values = [v for _, v in index.by_name[names[0]]]
        value = _combine(values, COMMON[common].combine if kind == GAUGE else "sum")
        if value is None:
            continue
        (snap.gauges if kind == GAUGE else snap.counters)[common] = value
    return snap
