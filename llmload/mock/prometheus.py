"""`/metrics` in Prometheus text format, with vLLM's metric names; and the latency histograms
the engine and the server fill for it (Prometheus' cumulative-bucket shape).

Usage::

    h = LatencyHistogram(TTFT_BUCKETS); h.observe(0.12)
    text = render_metrics(engine, "my-model", {"completed": 3}, lag=h)
"""

from __future__ import annotations

import bisect
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from llmload.mock.engine import BatchingEngine
    from llmload.mock.fixed_engine import FixedEngine

# vLLM's bucket bounds (seconds) for its TTFT and TPOT histograms.
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                10.0, 20.0, 40.0, 80.0)


class LatencyHistogram:
    """Cumulative-bucket histogram in Prometheus' shape (per-bucket counts, sum, count)."""

    def __init__(self, bounds: tuple[float, ...]) -> None:
        self.bounds = bounds
        self.counts = [0] * (len(bounds) + 1)  # last one is +Inf
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.counts[bisect.bisect_left(self.bounds, value)] += 1
        self.sum += value
        self.count += 1




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
