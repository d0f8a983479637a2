"""Command-line options of `llmload mock`: profile + per-parameter overrides → MockConfig."""

from __future__ import annotations

import argparse
import dataclasses
from dataclasses import dataclass, field

from llmload.argtypes import PORT, POSITIVE_SECONDS, PROBABILITY, number
from llmload.mock.api.admin_api import ADMIN_PATHS
from llmload.mock.engine.engine_base import EngineParams
from llmload.mock.engine.metrics_state import METRIC_FORMATS
from llmload.mock.engine.priority_engine import POLICIES
from llmload.mock.front.faults import Fault, parse_fault_rate
from llmload.mock.front.lora import LoraConfig, add_lora_arguments, lora_config
from llmload.mock.profiles import DEFAULT_PROFILE, PROFILES, Profile, get_profile
from llmload.mock.telemetry.gpu_telemetry import GpuModel, parse_throttle

NON_NEGATIVE_MS = number(at_least=0, noun="milliseconds")
ENGINE_FLAGS = {f.name: f.type for f in dataclasses.fields(EngineParams)}


@dataclass
class MockConfig:
    """Everything the mock server needs to start: the engine, the faults, the log."""

    profile: Profile
    engine_params: EngineParams | None  # None: fixed engine
    fixed_ttft_ms: float = 50.0
    fixed_itl_ms: float = 10.0
    model: str = "mock"
    fault_rates: list[tuple[Fault, float]] = field(default_factory=list)
    seed: int = 0
    log_path: str | None = None
    log_tokens: bool = False  # the log also lists every streamed token's send time
    output_mean_tokens: int = 256
    tool_call_rate: float = 0.5  # share of tool_choice "auto" replies that call a tool
    metrics_format: str = "vllm"  # names and counting of /metrics: vllm, sglang or tgi
    retry_after_s: float | None = None  # Retry-After sent with 429 and 503 faults
    max_connections: int = 20_000  # beyond this many open connections a new one gets 503 and is closed
    idle_timeout_s: float = 300.0  # a connection that sends no byte of a request for this long is closed
    gpu: GpuModel = field(default_factory=GpuModel)  # the simulated GPUs behind /dcgm/metrics
    spec_acceptance: float | None = None  # --spec-decode-acceptance: a simulated draft model's acceptance
    spec_tokens: int = 3
    embed_base_ms: float = 2.0  # /v1/embeddings: each step's fixed cost
    embed_per_token_ms: float = 0.01  # and its cost per token
    embed_batch_tokens: int = 16384  # tokens a step takes from the queue at most
    embed_dim: int = 384  # a vector's length when the request gives no dimensions
    rerank_per_pair_ms: float = 0.05  # /v1/rerank, /v1/score: a step's cost per query-document pair
    admin_log_path: str | None = None  # --admin-log: the admin calls (cache resets, profiler), one JSON line each
    fail_admin: tuple[str, ...] = ()  # --fail-admin: admin paths answered 500
    lora: LoraConfig | None = None  # --lora-adapters: adapters beside the base model, in --max-loras slots
    audio_rtfx: float = 100.0  # /v1/audio/transcriptions: audio seconds the encoder transcribes per second
    audio_itl_ms: float = 2.0  # and the time between a transcript's words
    scheduling: str = "fcfs"  # --scheduling: fcfs, or priority (vLLM's policy, with preemption)
    max_queue: int | None = None  # --max-queue: an arrival with this many waiting ahead of it gets 429


def add_mock_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--host", default="127.0.0.1", help="address to bind (default 127.0.0.1)")
    p.add_argument("--port", type=PORT, default=8000, help="port (0: any free port; default 8000)")
    p.add_argument("--profile", default=DEFAULT_PROFILE, help=f"engine preset (default {DEFAULT_PROFILE})")
    p.add_argument("--list-profiles", action="store_true", help="list the profiles and exit")
    p.add_argument("--log", metavar="FILE", help="append a ground-truth JSON line per request to FILE")
    p.add_argument("--log-tokens", action="store_true",
                   help="with --log: also log each streamed token's send time (token_mono, the perf_counter clock)")
    p.add_argument("--model", help="model name to report (default: the profile's)")
    p.add_argument("--seed", type=int, default=0, help="seed for output lengths and fault draws")
    p.add_argument("--output-mean-tokens", type=int, help="median output length when ignore_eos is not set")
    p.add_argument("--tool-call-rate", type=PROBABILITY, default=0.5, metavar="P",
                   help="share of replies that call a tool when tools are offered with tool_choice auto "
                        "(required or a named function: always; none: never; default 0.5)")
    p.add_argument("--ttft-ms", type=float, help="fixed profile: first-token delay")
    p.add_argument("--itl-ms", type=float, help="fixed profile: interval between tokens")
    p.add_argument("--metrics-format", choices=METRIC_FORMATS, default="vllm",
                   help="/metrics names and counting of this engine (default vllm)")
    p.add_argument("--fault", action="append", default=[], metavar="VALUE=RATE",
                   help="inject a fault into a share of requests, e.g. 429=0.05, disconnect:10=0.01, "
                        "stall:2=0.01 (repeatable)")
    p.add_argument("--retry-after", type=float, default=None, metavar="S",
                   help="send Retry-After: S with 429 and 503 faults (default: no Retry-After)")
    p.add_argument("--max-connections", type=number(at_least=1, integer=True), default=20_000, metavar="N",
                   help="open connections served at once; one more is answered 503 and closed (default 20000)")
    p.add_argument("--idle-timeout", type=POSITIVE_SECONDS, default=300.0, metavar="S",
                   help="close a connection that sends nothing of a request for S seconds (default 300)")
    p.add_argument("--admin-log", metavar="FILE", help="append a JSON line per admin call (/reset_prefix_cache, "
                                                       "/flush_cache, /start_profile, /stop_profile) to FILE")
    p.add_argument("--fail-admin", action="append", default=[], metavar="PATH", choices=ADMIN_PATHS,
                   help="answer this admin path with HTTP 500, e.g. /stop_profile (repeatable)")
    gpu = p.add_argument_group("simulated GPUs (/dcgm/metrics, in dcgm-exporter's shape)")
    gpu.add_argument("--gpus", type=number(at_least=1, integer=True), default=1, metavar="N",
                     help="GPUs the replica runs on; they share its work evenly (default 1)")
    gpu.add_argument("--gpu-idle-w", type=number(at_least=0), default=75.0, metavar="W",
                     help="each GPU's power when idle, in watts (default 75)")
    gpu.add_argument("--gpu-j-per-prefill-token", type=number(at_least=0), default=0.004, metavar="J",
                     help="energy of one prefill token on top of idle, in joules, all GPUs together (default 0.004)")
    gpu.add_argument("--gpu-j-per-decode-token", type=number(at_least=0), default=0.1, metavar="J",
                     help="energy of one decode token on top of idle, in joules, all GPUs together (default 0.1)")
    gpu.add_argument("--gpu-throttle", default=None, metavar="START:SECONDS",
                     help="throttle the GPUs (power cap) for SECONDS from START seconds after the first request: "
                          "slower steps and DCGM's throttle reasons (default: never)")
    p.add_argument("--spec-decode-acceptance", type=number(at_least=0, at_most=1), default=None, metavar="P",
                   help="simulate a draft model: each decode step drafts --spec-decode-tokens tokens, each accepted "
                        "with probability P; vLLM's spec_decode counters (SGLang's gauges) show it (default: off)")
    p.add_argument("--spec-decode-tokens", type=number(at_least=1, at_most=16, integer=True), default=3, metavar="K",
                   help="draft tokens per step with --spec-decode-acceptance (default 3)")
    e = p.add_argument_group("embeddings and rerank (/v1/embeddings: steps batched by tokens; /v1/rerank, "
                             "/v1/score: by pairs)")
    e.add_argument("--embed-base-ms", type=NON_NEGATIVE_MS, default=2.0, metavar="MS",
                   help="each embedding step's fixed cost (default 2.0)")
    e.add_argument("--embed-per-token-ms", type=NON_NEGATIVE_MS, default=0.01, metavar="MS",
                   help="each embedding step's cost per token it holds (default 0.01; 0: fixed latency)")
    e.add_argument("--embed-batch-tokens", type=number(at_least=1, integer=True), default=16384, metavar="N",
                   help="tokens one embedding step takes from the queue at most (default 16384)")
    e.add_argument("--embed-dim", type=number(at_least=1, integer=True), default=384, metavar="N",
                   help="the vectors' length when a request gives no dimensions (default 384)")
    e.add_argument("--rerank-per-pair-ms", type=NON_NEGATIVE_MS, default=0.05, metavar="MS",
                   help="/v1/rerank and /v1/score: a step's cost per query-document pair (default 0.05; the step "
                        "also costs --embed-base-ms)")
    add_lora_arguments(p)
    a = p.add_argument_group("audio transcription (/v1/audio/transcriptions: steps batched by seconds of audio)")
    a.add_argument("--audio-rtfx", type=number(above=0, noun="audio seconds per second"), default=100.0,
                   metavar="X", help="the encoder's real-time factor: audio seconds it transcribes per second, "
                                     "whatever the concurrency; a clip's first words leave when its step ends "
                                     "(default 100)")
    a.add_argument("--audio-itl-ms", type=NON_NEGATIVE_MS, default=2.0, metavar="MS",
                   help="the time between a transcript's words (2.5 words per audio second; default 2.0)")
    q = p.add_argument_group("scheduling (the batching engine's waiting queue)")
    q.add_argument("--scheduling", choices=POLICIES, default="fcfs",
                   help="fcfs: arrival order (default); priority: vLLM's --scheduling-policy priority, the body's "
                        "priority (lower first) orders the queue and a more urgent arrival preempts the least urgent "
                        "running request when the batch is full (vllm:num_preemptions)")
    q.add_argument("--max-queue", type=number(at_least=1, integer=True), default=None, metavar="N",
                   help="answer 429 to an arrival with N or more requests waiting ahead of it (priority: those of "
                        "its own or a more urgent class, so the least urgent class is shed first; default: unbounded; "
                        "a batching profile's queue: the fixed engine has none)")
    g = p.add_argument_group("engine parameters (override the profile)")
    for name, kind in ENGINE_FLAGS.items():
        flag = "--" + name.replace("_", "-")
        if kind in (bool, "bool"):
            g.add_argument(flag, dest=name, action=argparse.BooleanOptionalAction, default=None)
        else:
            conv = int if kind in (int, "int") else float
            g.add_argument(flag, dest=name, type=conv, default=None)


def list_profiles() -> str:
    lines = []
    for name, prof in PROFILES.items():
        lines.append(f"{name:20s} {prof.description}")
    return "\n".join(lines)


def config_from_args(args: argparse.Namespace) -> MockConfig:
    profile = get_profile(args.profile)
    overrides = {k: getattr(args, k) for k in ENGINE_FLAGS if getattr(args, k, None) is not None}
    if profile.engine is None:
        if overrides:
            raise ValueError(f"profile {profile.name!r} has no batching engine; engine flags do not apply: "
                             + ", ".join("--" + k.replace("_", "-") for k in overrides))
        params = None
    else:
        params = dataclasses.replace(profile.engine, **overrides)
        params.validate()
    rates = [parse_fault_rate(f) for f in args.fault]
    if getattr(args, "log_tokens", False) and not args.log:
        raise ValueError("--log-tokens needs --log FILE")
    throttle_text = getattr(args, "gpu_throttle", None)
    gpu = GpuModel(gpus=getattr(args, "gpus", 1), idle_w=getattr(args, "gpu_idle_w", 75.0),
                   j_per_prefill_token=getattr(args, "gpu_j_per_prefill_token", 0.004),
                   j_per_decode_token=getattr(args, "gpu_j_per_decode_token", 0.1),
                   throttle=parse_throttle(throttle_text) if throttle_text else None)
    max_connections = getattr(args, "max_connections", 20_000)  # bounded by the parser (argtypes)
    scheduling = getattr(args, "scheduling", None) or "fcfs"
    max_queue = getattr(args, "max_queue", None)
    queue_flags = [f for f, given in ((f"--scheduling {scheduling}", scheduling != "fcfs"),
                                      (f"--max-queue {max_queue}", max_queue is not None)) if given]
    if queue_flags and params is None:  # the fixed engine has no waiting queue to order or bound
        raise ValueError(f"{queue_flags[0]}: profile {profile.name!r} has no batching engine to schedule; "
                         "pick a batching profile (llmload mock --list-profiles)")
    idle_timeout = getattr(args, "idle_timeout", 300.0)
    return MockConfig(
        profile=profile,
        engine_params=params,
        fixed_ttft_ms=args.ttft_ms if args.ttft_ms is not None else profile.fixed_ttft_ms,
        fixed_itl_ms=args.itl_ms if args.itl_ms is not None else profile.fixed_itl_ms,
        model=args.model or profile.model,
        fault_rates=rates,
        seed=args.seed,
        log_path=args.log,
        log_tokens=bool(getattr(args, "log_tokens", False)),
        output_mean_tokens=args.output_mean_tokens or profile.output_mean_tokens,
        tool_call_rate=args.tool_call_rate,
        metrics_format=getattr(args, "metrics_format", None) or "vllm",
        retry_after_s=args.retry_after,
        max_connections=max_connections,
        idle_timeout_s=idle_timeout,
        gpu=gpu,
        spec_acceptance=getattr(args, "spec_decode_acceptance", None),
        spec_tokens=getattr(args, "spec_decode_tokens", 3),
        embed_base_ms=getattr(args, "embed_base_ms", 2.0),
        embed_per_token_ms=getattr(args, "embed_per_token_ms", 0.01),
        embed_batch_tokens=getattr(args, "embed_batch_tokens", 16384),
        embed_dim=getattr(args, "embed_dim", 384),
        rerank_per_pair_ms=getattr(args, "rerank_per_pair_ms", 0.05),
        admin_log_path=getattr(args, "admin_log", None),
        fail_admin=tuple(getattr(args, "fail_admin", None) or ()),
        lora=lora_config(args),
        audio_rtfx=getattr(args, "audio_rtfx", 100.0),
        audio_itl_ms=getattr(args, "audio_itl_ms", 2.0),
        scheduling=scheduling,
        max_queue=max_queue,
    )
