"""`/metrics` in Prometheus text format, under the names of vLLM (V1), SGLang or TGI
(``--metrics-format``), with values that follow the mock's engine. Pure: state in, text out.

Per format, what the engine's own code exposes (names, labels, types, bucket layouts; see
:mod:`llmload.mock.engine.metrics_state`) and when it counts:

* ``vllm``: ``vllm:num_requests_running|waiting``, ``vllm:kv_cache_usage_perc`` (a ratio),
  ``vllm:prefix_cache_queries|hits_total`` and ``vllm:prompt_tokens_total`` (at admission),
  ``vllm:generation_tokens_total`` (every token), ``vllm:num_preemptions_total``, TTFT,
  inter-token latency, TPOT per request, queue time and E2E histograms,
  ``vllm:request_success_total`` by ``finished_reason`` (stop, length, abort, error) and the
  ``vllm:request_prompt_tokens`` histogram; labels ``model_name`` and ``engine="0"``. Pooling
  requests (embeddings, rerank, score) count where vLLM V1 counts them: prompt tokens, a TTFT and
  an E2E when their output is ready, queue time, prompt length, and success ``stop``.
* ``sglang``: the scheduler's ``sglang:num_running_reqs``, ``num_queue_reqs``, ``token_usage``,
  ``num_used_tokens``, ``max_total_num_tokens``, ``cache_hit_rate``,
  ``num_retracted_requests_total`` and queue-time histogram (labels ``model_name``,
  ``engine_type``, ``tp_rank``, ``pp_rank``); the tokenizer's token counters, which grow when a
  request finishes (``sglang:cached_tokens_total`` appears at the first cached token), and its
  TTFT, inter-token latency and E2E histograms (label ``model_name``).
* ``tgi``: ``tgi_request_count|success``, ``tgi_batch_current_size``, ``tgi_queue_size``,
  ``tgi_batch_current_max_tokens`` (KV tokens reserved by the running batch) over
  ``tgi_batch_max_total_tokens``, and per-request histograms, as ``metrics-exporter-prometheus``
  prints them: no labels, a blank line after each family, numbers as Rust prints them.

Every format also carries the mock's own ``llmload_mock:event_lag_seconds`` and
``llmload_mock:write_span_seconds`` (its scheduling health, read by the benchmarks).

Usage::

    text = render_metrics(engine, "my-model", {"completed": 3}, lag=h, metrics_format="sglang")
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from llmload.mock.engine.metrics_state import METRIC_FORMATS, LatencyHistogram

if TYPE_CHECKING:
    from llmload.mock.engine.batching_engine import BatchingEngine
    from llmload.mock.engine.fixed_engine import FixedEngine

    Engine = BatchingEngine | FixedEngine

__all__ = ["METRIC_FORMATS", "LatencyHistogram", "render_metrics"]


def _num(x: float) -> str:
    """A number as Rust's Display and Python's repr agree on: ``32`` for 32.0, else the shortest repr."""
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(float(x))


def _histogram(name: str, help_text: str | None, h: LatencyHistogram, labels: str) -> list[str]:
    out = ([f"# HELP {name} {help_text}"] if help_text else []) + [f"# TYPE {name} histogram"]
    lab = labels + "," if labels else ""
    brace = f"{{{labels}}}" if labels else ""
    cumulative = 0
    for bound, count in zip(h.bounds, h.counts, strict=False):
        cumulative += count
        out.append(f'{name}_bucket{{{lab}le="{_num(bound)}"}} {cumulative}')
    out.append(f'{name}_bucket{{{lab}le="+Inf"}} {h.count}')
    out.append(f"{name}_sum{brace} {_num(h.sum)}")
    out.append(f"{name}_count{brace} {h.count}")
    return out


class _Text:
    """Lines of one exposition; ``one`` adds a family with a single series."""

    def __init__(self) -> None:
        self.lines: list[str] = []

    def one(self, name: str, kind: str, help_text: str | None, value: float, labels: str = "") -> None:
        if help_text:
            self.lines.append(f"# HELP {name} {help_text}")
        self.lines.append(f"# TYPE {name} {kind}")
        self.lines.append(f"{name}{{{labels}}} {_num(value)}" if labels else f"{name} {_num(value)}")

    def hist(self, name: str, help_text: str | None, h: LatencyHistogram | None, labels: str) -> None:
        if h is not None:
            self.lines += _histogram(name, help_text, h, labels)


def _vllm(t: _Text, engine: Engine, model: str, outcomes: dict[str, int]) -> None:
    s, cache = engine.stats, engine.prefix_cache
    lab = f'engine="0",model_name="{model}"'
    t.one("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
          engine.num_running, lab)
    t.one("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.", engine.num_waiting, lab)
    t.one("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", engine.kv_usage, lab)
    t.one("vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of number of queried tokens.",
          cache.queried_tokens, lab)
    t.one("vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of cached tokens.",
          cache.hit_tokens, lab)
    t.one("vllm:num_preemptions_total", "counter", "Cumulative number of preemption from the engine.",
          s.preemptions, lab)
    t.one("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", s.prompt_tokens, lab)
    t.one("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.", s.generation_tokens, lab)
    t.lines += ["# HELP vllm:request_success_total Count of successfully processed requests.",
                "# TYPE vllm:request_success_total counter"]
    t.lines += [f'vllm:request_success_total{{{lab},finished_reason="{k}"}} {v}'
                for k, v in sorted(s.finished_reasons.items())]
    t.hist("vllm:request_prompt_tokens", "Number of prefill tokens processed.", s.request_prompt_tokens, lab)
    t.hist("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.", s.ttft, lab)
    t.hist("vllm:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", s.itl, lab)
    t.hist("vllm:request_time_per_output_token_seconds", "Histogram of time_per_output_token_seconds per request.",
           s.tpot, lab)
    t.hist("vllm:e2e_request_latency_seconds", "Histogram of e2e request latency in seconds.", s.e2e, lab)
    if s.spec is not None:
        sp = s.spec
        t.one("vllm:spec_decode_num_drafts_total", "counter", "Number of spec decoding drafts.", sp.drafts, lab)
        t.one("vllm:spec_decode_num_draft_tokens_total", "counter", "Number of draft tokens.", sp.draft_tokens, lab)
        t.one("vllm:spec_decode_num_accepted_tokens_total", "counter", "Number of accepted tokens.", sp.accepted,
              lab)
        t.lines += ["# HELP vllm:spec_decode_num_accepted_tokens_per_pos_total Accepted tokens per draft position.",
                    "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter"]
        t.lines += [f'vllm:spec_decode_num_accepted_tokens_per_pos_total{{{lab},position="{i}"}} {n}'
                    for i, n in enumerate(sp.per_position)]
    t.hist("vllm:request_queue_time_seconds", "Histogram of time spent in WAITING phase for request.", s.queue, lab)


def _sglang(t: _Text, engine: Engine, model: str, outcomes: dict[str, int]) -> None:
    s, cache = engine.stats, engine.prefix_cache
    sched = f'engine_type="unified",model_name="{model}",pp_rank="0",tp_rank="0"'
    tok = f'model_name="{model}"'
    hit_rate = cache.hit_tokens / cache.queried_tokens if cache.queried_tokens else 0.0
    for name, help_text, value in (
            ("num_running_reqs", "The number of running requests.", engine.num_running),
            ("num_used_tokens", "The number of used tokens.", engine.kv_used),
            ("token_usage", "The token usage.", engine.kv_usage),
            ("num_queue_reqs", "The number of requests in the waiting queue.", engine.num_waiting),
            ("cache_hit_rate", "The prefix cache hit rate.", hit_rate),
            ("max_total_num_tokens", "Maximum total number of tokens in the KV cache pool.", engine.kv_capacity)):
        t.one(f"sglang:{name}", "gauge", help_text, value, sched)
    t.one("sglang:num_retracted_requests_total", "counter", "Total number of retracted requests.", s.preemptions,
          sched)
    t.hist("sglang:queue_time_seconds", "Histogram of queueing time in seconds.", s.queue, sched)
    t.one("sglang:prompt_tokens_total", "counter", "Number of prefill tokens processed.", s.finished_prompt_tokens,
          tok)
    t.one("sglang:generation_tokens_total", "counter", "Number of generation tokens processed.",
          s.finished_generation_tokens, tok)
    if s.finished_cached_tokens:  # SGLang creates it at the first request with cached tokens
        t.one("sglang:cached_tokens_total", "counter", "Number of cached prompt tokens.", s.finished_cached_tokens, tok)
    t.one("sglang:num_requests_total", "counter", "Number of requests processed.", s.requests_finished, tok)
    t.one("sglang:num_aborted_requests_total", "counter", "Number of requests aborted.", s.requests_aborted, tok)
    t.hist("sglang:time_to_first_token_seconds", "Histogram of time to first token in seconds.", s.ttft, tok)
    t.hist("sglang:inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", s.itl, tok)
    t.hist("sglang:e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", s.e2e, tok)
    if s.spec is not None:  # SGLang's gauges; the mock's are over the whole run (SGLang's: its last log interval)
        t.one("sglang:spec_accept_rate", "gauge", "The average acceptance rate of speculative decoding.",
              s.spec.accept_rate, sched)
        t.one("sglang:spec_accept_length", "gauge", "The average acceptance length of speculative decoding.",
              s.spec.accept_length, sched)


def _tgi(t: _Text, engine: Engine, model: str, outcomes: dict[str, int]) -> None:
    s = engine.stats
    families: list[tuple[str, str, str | None, float]] = [
        ("tgi_request_count", "counter", "Total number of requests", s.requests_received),
        ("tgi_request_success", "counter", "Number of successful requests", s.requests_finished),
        ("tgi_batch_current_size", "gauge", "Current batch size", engine.num_running),
        ("tgi_queue_size", "gauge", "Current queue size", engine.num_waiting),
        ("tgi_batch_current_max_tokens", "gauge", "Maximum tokens for the current batch", engine.kv_used),
        ("tgi_batch_max_total_tokens", "gauge", None, engine.kv_capacity),
    ]
    for name, kind, help_text, value in families:
        t.one(name, kind, help_text, value)
        t.lines.append("")
    for name, help_text, h in (
            ("tgi_request_duration", "Total time spent processing the request", s.e2e),
            ("tgi_request_queue_duration", "Time spent in the queue per request", s.queue),
            ("tgi_request_mean_time_per_token_duration", "Mean time per token per request", s.tpot),
            ("tgi_request_input_length", "Input token length per request", s.input_length),
            ("tgi_request_max_new_tokens", "Maximum new tokens per request", s.max_new_tokens),
            ("tgi_request_generated_tokens", "Generated tokens per request", s.generated_tokens)):
        t.hist(name, help_text, h, "")
        t.lines.append("")


_RENDER: dict[str, Callable[[_Text, Engine, str, dict[str, int]], None]] = {
    "vllm": _vllm, "sglang": _sglang, "tgi": _tgi}


def render_metrics(engine: Engine, model: str, outcomes: dict[str, int], lag: LatencyHistogram | None = None,
                   write_span: LatencyHistogram | None = None, metrics_format: str | None = None) -> str:
    """The whole body, in ``metrics_format`` (default: the one the engine's stats were made for)."""
    fmt = metrics_format or engine.stats.format
    t = _Text()
    _RENDER[fmt](t, engine, model, outcomes)
    labels = f'model_name="{model}"'
    t.hist("llmload_mock:event_lag_seconds", "How late the mock handled each engine event vs. its modelled time.",
           lag, labels)
    t.hist("llmload_mock:write_span_seconds", "Time from the first to the last write of one engine event's tokens.",
           write_span, labels)
    return "\n".join(t.lines) + "\n"
