"""Which metric of each known engine holds which common fact, and where each engine serves them. Pure data.

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
spec_drafts                    counter    drafts      sum      speculative decoding: drafts (vLLM)
spec_draft_tokens              counter    tokens      sum      draft tokens proposed (vLLM)
spec_accepted_tokens           counter    tokens      sum      of which accepted (vLLM)
spec_accept_rate               gauge      ratio 0..1  mean     accepted share of draft tokens (SGLang)
spec_accept_length             gauge      tokens      mean     tokens per step, bonus included (SGLang)
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

Usage::

    ENGINES["vllm"].sources["kv_cache_usage"]     # (Source("vllm:kv_cache_usage_perc", "gauge"), ...)
    ENGINES["trtllm"].path                        # "/prometheus/metrics"
    COMMON["requests_waiting"].combine            # "sum"
"""

from __future__ import annotations

from dataclasses import dataclass

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
    CommonMetric("requests_finished", COUNTER, "requests", "sum"),
    CommonMetric("prompt_tokens", COUNTER, "tokens", "sum"),
    CommonMetric("generation_tokens", COUNTER, "tokens", "sum"),
    CommonMetric("server_ttft_seconds", HISTOGRAM, "s", "sum"),
    CommonMetric("server_itl_seconds", HISTOGRAM, "s", "sum"),
    CommonMetric("server_queue_time_seconds", HISTOGRAM, "s", "sum"),
    CommonMetric("server_e2e_seconds", HISTOGRAM, "s", "sum"),
    CommonMetric("spec_drafts", COUNTER, "drafts", "sum"),
    CommonMetric("spec_draft_tokens", COUNTER, "tokens", "sum"),
    CommonMetric("spec_accepted_tokens", COUNTER, "tokens", "sum"),
    CommonMetric("spec_accept_rate", GAUGE, "ratio", "mean"),
    CommonMetric("spec_accept_length", GAUGE, "tokens", "mean"),
)}


@dataclass(frozen=True, slots=True)
class Source:
    """Where one engine keeps a common metric.

    ``kind``: ``gauge``; ``counter`` (``name`` without ``_total``; both spellings match);
    ``histogram`` (``name`` without ``_bucket``/``_sum``/``_count``); ``histogram_sum`` (a
    histogram's ``_sum`` read as a counter); ``ratio`` (gauge ``name`` over gauge ``denominator``);
    ``counter_sum`` (counter ``name`` plus counter ``denominator``, both needed).
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


def _sum(name: str, other: str) -> Source:
    return Source(name, "counter_sum", other)


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
            "requests_finished": (_c("vllm:request_success"),),  # every finished_reason, summed
            "prompt_tokens": (_c("vllm:prompt_tokens"),),
            "generation_tokens": (_c("vllm:generation_tokens"),),
            "server_ttft_seconds": (_h("vllm:time_to_first_token_seconds"),),
            "server_itl_seconds": (_h("vllm:inter_token_latency_seconds"), _h("vllm:time_per_output_token_seconds")),
            "server_queue_time_seconds": (_h("vllm:request_queue_time_seconds"),),
            "server_e2e_seconds": (_h("vllm:e2e_request_latency_seconds"),),
            # speculative decoding (vllm/v1/spec_decode/metrics.py): counters, present with a draft model
            "spec_drafts": (_c("vllm:spec_decode_num_drafts"),),
            "spec_draft_tokens": (_c("vllm:spec_decode_num_draft_tokens"),),
            "spec_accepted_tokens": (_c("vllm:spec_decode_num_accepted_tokens"),),
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
            "requests_finished": (_c("sglang:num_requests"),),
            "prompt_tokens": (_c("sglang:prompt_tokens"),),
            "generation_tokens": (_c("sglang:generation_tokens"),),
            "server_ttft_seconds": (_h("sglang:time_to_first_token_seconds"),),
            "server_itl_seconds": (_h("sglang:inter_token_latency_seconds"),),
            "server_queue_time_seconds": (_h("sglang:queue_time_seconds"),),
            "server_e2e_seconds": (_h("sglang:e2e_request_latency_seconds"),),
            # speculative decoding: gauges over SGLang's last log interval (python/sglang/srt/metrics/collector.py)
            "spec_accept_rate": (_g("sglang:spec_accept_rate"),),
            "spec_accept_length": (_g("sglang:spec_accept_length"),),
        }),
    EngineMetrics(
        "tgi", "tgi_", "/metrics", "on by default (text-generation-launcher)", {
            "requests_running": (_g("tgi_batch_current_size"),),
            "requests_waiting": (_g("tgi_queue_size"),),
            "requests_finished": (_c("tgi_request_success"),),
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
            # llama.cpp's prompt counter leaves out the tokens reused from its cache since the cached
            # counter exists; both together are the prompt, as the client (and other engines) count it
            "prefix_cache_queries_tokens": (_sum("llamacpp:prompt_tokens", "llamacpp:prompt_tokens_cached"),),
            "prefix_cache_hits_tokens": (_c("llamacpp:prompt_tokens_cached"),),
            # removed upstream in 2025 (ggml-org/llama.cpp#13660); older builds still have it
            "kv_cache_usage": (_g("llamacpp:kv_cache_usage_ratio"),),
            "prompt_tokens": (_sum("llamacpp:prompt_tokens", "llamacpp:prompt_tokens_cached"),
                              _c("llamacpp:prompt_tokens")),
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

DEFAULT_PATHS = tuple(dict.fromkeys(e.path for e in ENGINES.values()))
"""Where to look for a server's Prometheus text when no URL is given, in this order."""
