"""What every simulated engine shares (the batching one, :mod:`.batching_engine`; the fixed one,
:mod:`.fixed_engine`), so the HTTP front does not care which it drives: the batching engine's
parameters (:class:`EngineParams`), a request (:class:`EngineRequest`), a running sequence
(:class:`Sequence`), the tokens one event produces (:class:`Emission`) and the emitting of them,
with faults and counters (:class:`EngineBase`). Pure.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from typing import Any

from llmload.mock.engine.metrics_state import EngineStats
from llmload.mock.engine.prefix_cache import PrefixCache


@dataclass(frozen=True)
class EngineParams:
    """Everything that shapes the simulated engine's timing. All times in milliseconds."""

    max_num_seqs: int = 256
    max_num_batched_tokens: int = 2048
    kv_capacity_tokens: int = 500_000
    step_base_ms: float = 20.0
    step_per_seq_ms: float = 0.25
    step_per_prefill_token_ms: float = 0.02
    step_per_context_token_ms: float = 0.0
    api_overhead_ms: float = 0.0
    schedule_delay_ms: float = 0.0  # an idle engine starts a step this long after a request is ready
    prefix_caching: bool = True
    chunked_prefill: bool = True
    max_model_len: int = 32768

    def validate(self) -> None:
        ints = ("max_num_seqs", "max_num_batched_tokens", "kv_capacity_tokens", "max_model_len")
        for name in ints:
            if int(getattr(self, name)) < 1:
                raise ValueError(f"engine parameter {name}: expected a positive integer, got {getattr(self, name)}")
        for name in ("step_base_ms", "step_per_seq_ms", "step_per_prefill_token_ms",
                     "step_per_context_token_ms", "api_overhead_ms", "schedule_delay_ms"):
            if float(getattr(self, name)) < 0:
                raise ValueError(f"engine parameter {name}: expected a number >= 0, got {getattr(self, name)}")
        if self.step_base_ms + self.step_per_seq_ms <= 0:
            raise ValueError("engine parameters: step_base_ms + step_per_seq_ms must be > 0")


@dataclass
class EngineRequest:
    """What the engine needs to know of one request."""

    prompt_words: Seq[str]
    output_tokens: int
    slow_first_s: float = 0.0  # extra delay before the request is admitted
    stall_after: int = 0  # after this many tokens, hold the sequence for stall_s
    stall_s: float = 0.0
    priority: int = 0  # the body's priority (vLLM: lower first); only --scheduling priority reads it


@dataclass(eq=False)
class Sequence:
    """One request inside the engine."""

    seq_id: int
    request: EngineRequest
    prompt_len: int
    arrival: float
    ready_at: float
    cached_tokens: int = 0
    prefilled: int = 0
    generated: int = 0
    kv_reserved: int = 0
    state: str = "waiting"  # waiting | running | finished | aborted
    first_token_time: float | None = None
    last_token_time: float | None = None
    held_until: float = 0.0
    block_hashes: list[int] = field(default_factory=list)
    user: object = None  # the front's handle; the engine never looks at it

    @property
    def finished(self) -> bool:
        return self.state in ("finished", "aborted")


@dataclass(frozen=True, slots=True)
class Emission:
    """Tokens a sequence produced at ``time``; ``first`` marks its first token. ``generated`` is
    the sequence's token count after this emission: a late caller may get several emissions of
    one sequence from one ``advance``, and ``seq.generated`` is then already past the earlier ones."""

    seq: Sequence
    tokens: int
    time: float
    first: bool
    finished: bool
    generated: int


class EngineBase:
    def __init__(self) -> None:
        self._ids = itertools.count(1)
        self.stats = EngineStats()
        self.prefix_cache = PrefixCache(0)
        self.gpu: Any = None  # a gpu_telemetry.GpuMeter: told every step, may slow it (throttling)
        # The priorities of requests the front holds before submitting them (waiting for a LoRA adapter's
        # slot, mock/front/lora.py): vLLM has them in its waiting queue, so they count as waiting
        self.held: list[int] = []

    def _emit(self, seq: Sequence, tokens: int, now: float, out: list[Emission]) -> None:
        first = seq.generated == 0
        seq.generated += tokens
        stats = self.stats
        stats.generation_tokens += tokens
        if first:
            seq.first_token_time = now
            if stats.ttft is not None:
                stats.ttft.observe(now - seq.arrival)
        elif stats.itl is not None and seq.last_token_time is not None:
            stats.itl.observe((now - seq.last_token_time) / tokens)
        if not first and stats.spec is not None:
            stats.spec.draft()  # one draft per decode step of the sequence
        seq.last_token_time = now
        done = seq.generated >= seq.request.output_tokens
        if done:
            seq.state = "finished"
            tpot = None
            if seq.generated > 1 and seq.first_token_time is not None:
                tpot = (now - seq.first_token_time) / (seq.generated - 1)
            stats.finished(seq.prompt_len, seq.cached_tokens, seq.generated, now - seq.arrival, tpot)
        req = seq.request
        if req.stall_s > 0 and seq.generated == req.stall_after and not done:
            seq.held_until = now + req.stall_s
        out.append(Emission(seq, tokens, now, first, done, seq.generated))
