"""What the mock engine counts for its ``/metrics``: token and request counters, and latency and
length histograms in Prometheus' cumulative-bucket shape, with the bucket layout of the engine
whose names the mock speaks (``--metrics-format``). Pure; the engines update it, and
:mod:`llmload.mock.telemetry.prometheus` renders it.

Each format gets only the histograms it exposes (the per-token one costs an observation per
generated token, so it exists only where the engine has it), with that engine's bounds:

* ``vllm``: TTFT, inter-token latency (per token), TPOT per request, queue time, E2E and the
  prompt's length (``vllm/v1/metrics/loggers.py``);
* ``sglang``: TTFT, inter-token latency, queue time (first bucket ``0.0``) and E2E
  (``python/sglang/srt/metrics/collector.py``);
* ``tgi``: queue, request duration and mean time per token on 35 geometric buckets
  0.0001 × 1.5^k, input length and generated tokens on 100 linear buckets up to the model's
  length (``router/src/server.rs``).

Usage::

    stats = EngineStats("sglang", max_model_len=32768)
    stats.ttft.observe(0.12)
    stats.itl is None            # True for "tgi": TGI has no per-token histogram
"""

from __future__ import annotations

import bisect
from typing import Any

METRIC_FORMATS = ("vllm", "sglang", "tgi")

# vLLM V1's bounds (seconds)
TTFT_BUCKETS = (0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0,
                7.5, 10.0, 20.0, 40.0, 80.0, 160.0, 640.0, 2560.0)
TPOT_BUCKETS = (0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.4, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5,
                10.0, 20.0, 40.0, 80.0)
LATENCY_BUCKETS = (0.3, 0.5, 0.8, 1.0, 1.5, 2.0, 2.5, 5.0, 10.0, 15.0, 20.0, 30.0, 40.0, 50.0, 60.0, 120.0,
                   240.0, 480.0, 960.0, 1920.0, 7680.0)
# SGLang's
SGLANG_TTFT = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400)
SGLANG_ITL = (0.002, 0.004, 0.006, 0.008, 0.010, 0.015, 0.020, 0.025, 0.030, 0.035, 0.040, 0.060, 0.080,
              0.100, 0.200, 0.400, 0.600, 0.800, 1.000, 2.000, 4.000, 6.000, 8.000)
SGLANG_E2E = (0.1, 0.2, 0.4, 0.6, 0.8, 1, 2, 4, 6, 8, 10, 20, 40, 60, 80, 100, 200, 400, 600, 1200, 1800, 2400)
SGLANG_QUEUE = (0.0, 0.1, 0.2, 0.5, 1, 2, 3, 4, 5, 10, 15, 20, 30, 40, 50, 60, 70, 80, 90, 100, 200, 300, 400,
                500, 600, 700, 800, 900, 1000, 1200, 1400, 1600, 1800, 2000, 2500, 3000)
# vLLM's request_prompt_tokens: 1-2-5 buckets up to max_model_len (vllm/v1/metrics/loggers.py build_1_2_5_buckets)


def buckets_1_2_5(top: float) -> tuple[float, ...]:
    out, exp = [], 0
    while True:
        for m in (1, 2, 5):
            v = m * 10 ** exp
            if v > top:
                return tuple(out)
            out.append(float(v))
        exp += 1


# TGI's: 35 geometric duration buckets
TGI_DURATION = tuple(0.0001 * 1.5 ** (k + 1) for k in range(35))


def _linear(top: float) -> tuple[float, ...]:
    """TGI's 100 linear buckets up to ``top`` (max input / max total tokens)."""
    return tuple(top / 100.0 * (k + 1) for k in range(100))


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


class EngineStats:
    """Counters and histograms ``/metrics`` exposes, updated by the engines.

    Token counters come in two clocks, as engines differ: ``prompt_tokens`` (at admission) and
    ``generation_tokens`` (every token) grow as vLLM's do; ``finished_*`` grow when a request
    ends, as SGLang's, TGI's and llama.cpp's do. Under ``--scheduling fcfs`` the mock never preempts
    (a request is admitted only when its whole KV footprint fits), so ``preemptions`` stays 0 and a
    KV-limited engine shows as a full cache with requests waiting; under ``--scheduling priority``
    it counts every request preempted for a more urgent one (:mod:`llmload.mock.engine.priority_engine`).
    """

    def __init__(self, metrics_format: str = "vllm", max_model_len: int = 32768) -> None:
        if metrics_format not in METRIC_FORMATS:
            raise ValueError(f"metrics format {metrics_format!r}: expected one of {', '.join(METRIC_FORMATS)}")
        self.format = metrics_format
        self.prompt_tokens = 0
        self.generation_tokens = 0
        self.finished_prompt_tokens = 0
        self.finished_generation_tokens = 0
        self.finished_cached_tokens = 0
        self.requests_received = 0
        self.requests_finished = 0
        self.requests_aborted = 0
        self.preemptions = 0
        self.spec: Any = None  # a spec_decode.SpecDecode when a draft model is simulated
        vllm, sglang, tgi = (metrics_format == f for f in METRIC_FORMATS)
        h = LatencyHistogram
        self.ttft = h(TTFT_BUCKETS if vllm else SGLANG_TTFT) if not tgi else None
        self.itl = h(TPOT_BUCKETS if vllm else SGLANG_ITL) if not tgi else None
        self.tpot = h(TPOT_BUCKETS if vllm else TGI_DURATION) if not sglang else None
        self.queue = h(LATENCY_BUCKETS if vllm else SGLANG_QUEUE if sglang else TGI_DURATION)
        self.e2e = h(LATENCY_BUCKETS if vllm else SGLANG_E2E if sglang else TGI_DURATION)
        self.input_length = h(_linear(max_model_len - 1)) if tgi else None
        self.max_new_tokens = h(_linear(max_model_len)) if tgi else None
        self.generated_tokens = h(_linear(max_model_len)) if tgi else None
        self.request_prompt_tokens = h(buckets_1_2_5(max_model_len)) if vllm else None
        # vLLM's request_success_total by finished_reason (stop, length, abort, error): pooling requests
        # (embeddings, rerank, score) finish "stop" as soon as their output is ready (vLLM's scheduler)
        self.finished_reasons: dict[str, int] = {"stop": 0, "length": 0, "abort": 0}  # vLLM shows these from the start
        self.pooling_requests = 0

    def submitted(self, prompt_len: int, max_tokens: int) -> None:
        """A request reached the engine (TGI measures lengths at validation)."""
        self.requests_received += 1
        if self.input_length is not None and self.max_new_tokens is not None:
            self.input_length.observe(prompt_len)
            self.max_new_tokens.observe(max_tokens)

    def admitted(self, prompt_len: int, queue_s: float) -> None:
        """A request left the queue for the running batch."""
        self.prompt_tokens += prompt_len
        self.queue.observe(max(0.0, queue_s))

    def finished_as(self, reason: str) -> None:
        """One request counted by vLLM's finished_reason."""
        self.finished_reasons[reason] = self.finished_reasons.get(reason, 0) + 1

    def pooled(self, prompt_len: int, queue_s: float, e2e_s: float) -> None:
        """A pooling request (embeddings, rerank, score) answered: counted as vLLM V1 counts one. Its
        one output comes while prefilling, so its prompt tokens and a TTFT (= its E2E) are recorded
        (IterationStats.update_from_output), then it finishes ``stop`` with no generated token."""
        self.pooling_requests += 1
        self.requests_received += 1
        self.admitted(prompt_len, queue_s)
        if self.ttft is not None:
            self.ttft.observe(e2e_s)
        self.finished(prompt_len, 0, 0, e2e_s, None)
        self.finished_as("stop")

    def finished(self, prompt_len: int, cached: int, generated: int, e2e_s: float, tpot_s: float | None) -> None:
        self.requests_finished += 1
        if self.request_prompt_tokens is not None:
            self.request_prompt_tokens.observe(prompt_len)
        self.finished_prompt_tokens += prompt_len
        self.finished_cached_tokens += cached
        self.finished_generation_tokens += generated
        self.e2e.observe(e2e_s)
        if tpot_s is not None and self.tpot is not None:
            self.tpot.observe(tpot_s)
        if self.generated_tokens is not None:
            self.generated_tokens.observe(generated)
