"""Named engine presets for `llmload mock --profile NAME`.

Each profile is an :class:`EngineParams` (batching engine) or the ``fixed`` engine, plus the
output-length distribution used when a request does not set ``ignore_eos``.

The default, ``vllm-v1``, has what a vLLM V1 server starts with today on an A100-class GPU
under 70 GB (``EngineArgs.get_batch_defaults`` for the OpenAI server: 256 sequences, a
2,048-token budget per step; V1 always chunks prefills and caches prefixes by default), with the
step costs of the calibrated ``qwen2.5-3b-a800`` profile. ``qwen2.5-3b-a800`` keeps vLLM 0.6.5's
defaults (no prefix cache, no chunked prefill) because its measured table was taken with them.
"""

from __future__ import annotations

from dataclasses import dataclass

from llmload.mock.engine.engine_base import EngineParams


@dataclass(frozen=True)
class Profile:
    name: str
    description: str
    engine: EngineParams | None  # None: the fixed engine
    model: str
    output_mean_tokens: int = 256  # median of the lognormal output length without ignore_eos
    fixed_ttft_ms: float = 50.0
    fixed_itl_ms: float = 10.0


_A800_STEP_COSTS = {"step_base_ms": 20.45, "step_per_seq_ms": 0.24, "step_per_prefill_token_ms": 0.01}

PROFILES: dict[str, Profile] = {
    p.name: p
    for p in (
        Profile(
            name="vllm-v1",
            description=(
                "vLLM V1 defaults (prefix caching and chunked prefill on, 256 sequences, 2,048-token step "
                "budget), Qwen2.5-3B-Instruct step costs from the A800 calibration; the default"
            ),
            model="Qwen/Qwen2.5-3B-Instruct",
            engine=EngineParams(
                max_num_seqs=256,
                max_num_batched_tokens=2048,
                kv_capacity_tokens=600_000,
                **_A800_STEP_COSTS,
                api_overhead_ms=5.0,  # V1 tokenizes and detokenizes in other processes than the engine core
                schedule_delay_ms=1.0,
                prefix_caching=True,
                chunked_prefill=True,
                max_model_len=32768,
            ),
        ),
        Profile(
            name="qwen2.5-3b-a800",
            description=(
                "vLLM 0.6.5, Qwen2.5-3B-Instruct on one A800-40GB (no chunked prefill, no prefix "
                "cache: vLLM 0.6.5 defaults); calibrated to a measured closed-loop table"
            ),
            model="Qwen/Qwen2.5-3B-Instruct",
            engine=EngineParams(
                max_num_seqs=256,
                max_num_batched_tokens=32768,
                kv_capacity_tokens=600_000,
                **_A800_STEP_COSTS,
                api_overhead_ms=15.0,
                schedule_delay_ms=2.0,
                prefix_caching=False,
                chunked_prefill=False,
                max_model_len=32768,
            ),
        ),
        Profile(
            name="llama3-70b-2xa100",
            description=(
                "a 70B model on 2 GPUs (tensor parallel): slow steps, 48 concurrent sequences, a "
                "small KV cache; the knee (~48 users, ~600 output tok/s) is far inside what one "
                "client core drives"
            ),
            model="meta-llama/Llama-3.1-70B-Instruct",
            engine=EngineParams(
                max_num_seqs=48,
                max_num_batched_tokens=2048,
                kv_capacity_tokens=120_000,
                step_base_ms=45.0,
                step_per_seq_ms=0.6,
                step_per_prefill_token_ms=0.09,
                step_per_context_token_ms=0.00002,
                api_overhead_ms=5.0,
                prefix_caching=True,
                chunked_prefill=True,
                max_model_len=32768,
            ),
            output_mean_tokens=200,
        ),
        Profile(
            name="fast",
            description=(
                "a small model on a fast GPU with tiny steps: high token rates, for client "
                "overhead benchmarks and quick tests"
            ),
            model="mock-fast",
            engine=EngineParams(
                max_num_seqs=1024,
                max_num_batched_tokens=8192,
                kv_capacity_tokens=4_000_000,
                step_base_ms=4.0,
                step_per_seq_ms=0.01,
                step_per_prefill_token_ms=0.001,
                api_overhead_ms=0.5,
                prefix_caching=True,
                chunked_prefill=True,
                max_model_len=131072,
            ),
            output_mean_tokens=128,
        ),
        Profile(
            name="kv-limited",
            description=(
                "a 7B model on a small GPU: plenty of sequence slots but a KV cache of 24,000 tokens, so "
                "the knee is where the cache fills (32 requests of 500 + 250 tokens) and requests queue "
                "for memory"
            ),
            model="mock-kv-limited",
            engine=EngineParams(
                max_num_seqs=256,
                max_num_batched_tokens=4096,
                kv_capacity_tokens=24_000,
                step_base_ms=20.0,
                step_per_seq_ms=0.1,
                step_per_prefill_token_ms=0.01,
                api_overhead_ms=1.0,
                prefix_caching=True,
                chunked_prefill=True,
                max_model_len=8192,
            ),
            output_mean_tokens=200,
        ),
        Profile(
            name="compute-bound",
            description=(
                "a model whose decode step grows 1.5 ms per running sequence and a KV cache that never "
                "fills: the knee is where the batch makes every step (TPOT) too slow"
            ),
            model="mock-compute-bound",
            engine=EngineParams(
                max_num_seqs=512,
                max_num_batched_tokens=8192,
                kv_capacity_tokens=10_000_000,
                step_base_ms=8.0,
                step_per_seq_ms=1.5,
                step_per_prefill_token_ms=0.005,
                api_overhead_ms=1.0,
                prefix_caching=True,
                chunked_prefill=True,
                max_model_len=32768,
            ),
            output_mean_tokens=200,
        ),
        Profile(
            name="fixed",
            description=(
                "constant first-token delay and inter-token interval (--ttft-ms, --itl-ms), no "
                "batching effects: ground truth for accuracy tests"
            ),
            model="mock-fixed",
            engine=None,
            output_mean_tokens=128,
        ),
    )
}

DEFAULT_PROFILE = "vllm-v1"


def get_profile(name: str) -> Profile:
    try:
        return PROFILES[name]
    except KeyError:
        known = ", ".join(sorted(PROFILES))
        raise ValueError(f"unknown mock profile {name!r}; known profiles: {known}") from None
