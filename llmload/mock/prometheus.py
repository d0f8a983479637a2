"""`/metrics` in Prometheus text format, with vLLM's metric names."""

from __future__ import annotations

from llmload.mock.engine import BatchingEngine, FixedEngine, LatencyHistogram


def _histogram(name: str, help_text: str, h: LatencyHistogram, labels: str) -> list[str]:
    out = [f"# HELP {name} {help_text}", f"# TYPE {name} histogram"]
    cumulative = 0
    for bound, count in zip(h.bounds, h.counts, strict=False):
        cumulative += count
        out.append(f'{name}_bucket{{{labels},le="{bound}"}} {cumulative}')
    out.append(f'{name}_bucket{{{labels},le="+Inf"}} {h.count}')
    out.append(f"{name}_sum{{{labels}}} {h.sum}")
    out.append(f"{name}_count{{{labels}}} {h.count}")
    return out


def render_metrics(engine: BatchingEngine | FixedEngine, model: str, outcomes: dict[str, int],
                   lag: LatencyHistogram | None = None, write_span: LatencyHistogram | None = None) -> str:
    labels = f'model_name="{model}"'
    s = engine.stats
    cache = engine.prefix_cache
    lines: list[str] = []

    def metric(name: str, kind: str, help_text: str, value: float) -> None:
        lines.extend((f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", f"{name}{{{labels}}} {value}"))

    metric("vllm:num_requests_running", "gauge", "Number of requests in model execution batches.",
           engine.num_running)
    metric("vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.",
           engine.num_waiting)
    metric("vllm:gpu_cache_usage_perc", "gauge", "GPU KV-cache usage. 1 means 100 percent usage.",
           engine.kv_usage)
    metric("vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.", engine.kv_usage)
    metric("vllm:prefix_cache_queries_total", "counter", "Prefix cache queries, in terms of number of tokens.",
           cache.queried_tokens)
    metric("vllm:prefix_cache_hits_total", "counter", "Prefix cache hits, in terms of number of tokens.",
           cache.hit_tokens)
    metric("vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.", s.prompt_tokens)
    metric("vllm:generation_tokens_total", "counter", "Number of generation tokens processed.",
           s.generation_tokens)
    lines += ["# HELP vllm:request_success_total Count of finished requests by outcome.",
              "# TYPE vllm:request_success_total counter"]
    for outcome, count in sorted(outcomes.items()):
        lines.append(f'vllm:request_success_total{{{labels},outcome="{outcome}"}} {count}')
    lines += _histogram("vllm:time_to_first_token_seconds", "Histogram of time to first token in seconds.",
                        s.ttft, labels)
    lines += _histogram("vllm:time_per_output_token_seconds", "Histogram of time per output token in seconds.",
                        s.tpot, labels)
    if lag is not None:  # the mock's own health, not a vLLM metric
        lines += _histogram("llmload_mock:event_lag_seconds",
                            "How late the mock handled each engine event vs. its modelled time.", lag, labels)
    if write_span is not None:
        lines += _histogram("llmload_mock:write_span_seconds",
                            "Time from the first to the last write of one engine event's tokens.", write_span, labels)
    return "\n".join(lines) + "\n"
