"""A simulated LLM serving engine: pure logic, driven by whatever clock the caller passes in.

Two engines share one interface so the HTTP front does not care which it drives (the fixed one
lives in :mod:`.fixed_engine`, the prefix cache in :mod:`.prefix_cache`):

* :class:`BatchingEngine` models a vLLM-like continuous-batching scheduler: at most
  ``max_num_seqs`` sequences run, each step has a token budget (``max_num_batched_tokens``)
  that decodes take first and prefill chunks fill (chunked prefill), a request is admitted only
  when its whole KV footprint fits in ``kv_capacity_tokens`` (no preemption), and a prefix
  cache over 16-token blocks lets prompts that share a prefix skip its prefill.
* :class:`FixedEngine` sends the first token a constant delay after arrival and then one token
  per constant interval, with no batching effects: the ground truth for accuracy tests.

Usage (a fake clock is just a float)::

    engine = BatchingEngine(EngineParams())
    seq = engine.submit(EngineRequest(prompt_words=["hi"] * 100, output_tokens=8), now=0.0)
    t = engine.next_event_time()          # when something next happens
    for emission in engine.advance(t):    # tokens produced by then
        ...

Step time = ``step_base_ms + step_per_seq_ms * seqs + step_per_prefill_token_ms * prefill
tokens + step_per_context_token_ms * decode context tokens``. Times are seconds.
"""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Sequence as Seq
from dataclasses import dataclass, field
from typing import Any

from llmload.mock.engine.metrics_state import EngineStats
from llmload.mock.engine.prefix_cache import BLOCK_SIZE, PrefixCache, prompt_block_hashes


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


class BatchingEngine(EngineBase):
    """Continuous batching with chunked prefill, KV-capacity admission and a prefix cache."""

    def __init__(self, params: EngineParams) -> None:
        super().__init__()
        params.validate()
        self.params = params
        self.prefix_cache = PrefixCache(params.kv_capacity_tokens // BLOCK_SIZE if params.prefix_caching else 0)
        self.waiting: deque[Sequence] = deque()
        self.running: list[Sequence] = []
        self.kv_used = 0
        self._step_end: float | None = None
        self._step_plan: list[tuple[Sequence, int]] = []  # (seq, prefill tokens; 0 = decode)
        self._now = float("-inf")
        self.steps = 0

    MAX_LAG_S = 0.005

    # -- interface -------------------------------------------------------------------------
    def submit(self, request: EngineRequest, now: float) -> Sequence:
        words = request.prompt_words
        seq = Sequence(
            seq_id=next(self._ids),
            request=request,
            prompt_len=max(1, len(words)),
            arrival=now,
            ready_at=now + self.params.api_overhead_ms / 1000.0 + request.slow_first_s,
        )
        if self.params.prefix_caching:
            seq.block_hashes = prompt_block_hashes(words)
        self.stats.submitted(seq.prompt_len, request.output_tokens)
        if request.output_tokens <= 0:
            seq.state = "finished"
            return seq
        self.waiting.append(seq)
        return seq

    def abort(self, seq: Sequence) -> None:
        """Free the sequence's slot and KV at once (client went away)."""
        if seq.finished:
            return
        if seq.state == "running":
            self.running.remove(seq)
            self.kv_used -= seq.kv_reserved
        else:
            try:
                self.waiting.remove(seq)
            except ValueError:
                pass
        seq.state = "aborted"
        self.stats.requests_aborted += 1

    def next_event_time(self) -> float | None:
        if self._step_end is not None:
            return self._step_end
        # Idle: only future times, so a request that is ready but cannot be admitted yet (no
        # slot, no KV) never makes the caller spin; it is picked up when a step ends.
        now = self._now
        times = [s.held_until for s in self.running if s.held_until > now]
        if len(self.running) < self.params.max_num_seqs:
            delay = self.params.schedule_delay_ms / 1000.0
            times += [s.ready_at + delay for s in self.waiting if s.ready_at + delay > now]
            if any(s.ready_at + delay <= now for s in self.waiting) and self._could_admit():
                times.append(now)
        return min(times) if times else None

    def advance(self, now: float) -> list[Emission]:
        """Finish the step that ends by ``now`` (if any), then start the next one.

        Back-to-back steps start at the previous step's modelled end, so a caller that wakes a
        little late does not stretch the model; one that is more than ``MAX_LAG_S`` late
        restarts the model clock at ``now``.
        """
        out: list[Emission] = []
        if self._step_end is not None:
            if now < self._step_end:
                return out
            end = self._step_end
            self._finish_step(out)
            start = end if now - end <= self.MAX_LAG_S else now
        else:
            # Idle: the engine loop picks new requests up ``schedule_delay_ms`` after the first
            # is ready, so requests arriving together are prefilled together (vLLM batches what
            # reached its queue by the time its loop turns).
            delay = self.params.schedule_delay_ms / 1000.0
            ready = [s.ready_at for s in self.waiting if s.ready_at <= now]
            decodable = any(s.held_until <= now for s in self.running)
            if ready and not decodable and now < min(ready) + delay:
                self._now = now
                return out
            start = now
        self._now = now
        self._start_step(start, now)
        return out

    # -- internals -------------------------------------------------------------------------
    def _finish_step(self, out: list[Emission]) -> None:
        end = self._step_end
        assert end is not None
        self._step_end = None
        self.steps += 1
        for seq, prefill in self._step_plan:
            if seq.finished:  # aborted during the step
                continue
            if prefill:
                seq.prefilled += prefill
                if seq.cached_tokens + seq.prefilled < seq.prompt_len:
                    continue
                self.prefix_cache.insert(seq.block_hashes)
            self._emit(seq, 1, end, out)
            if seq.finished:
                self.running.remove(seq)
                self.kv_used -= seq.kv_reserved
        self._step_plan = []

    def _could_admit(self) -> bool:
        if not self.running:
            return True
        head = next((s for s in self.waiting if s.ready_at <= self._now), None)
        return head is not None and (
            self.kv_used + head.prompt_len + head.request.output_tokens <= self.params.kv_capacity_tokens
        )

    def _admit(self, now: float) -> None:
        p = self.params
        if not self.waiting or len(self.running) >= p.max_num_seqs:
            return
        kept: deque[Sequence] = deque()
        while self.waiting:
            seq = self.waiting.popleft()
            if seq.ready_at > now:  # still in the API server (overhead, slow_first)
                kept.append(seq)
                continue
            need = seq.prompt_len + seq.request.output_tokens
            full = len(self.running) >= p.max_num_seqs
            if full or (self.kv_used + need > p.kv_capacity_tokens and self.running):
                # FCFS: the first ready request that does not fit blocks those behind it.
                kept.append(seq)
                kept.extend(self.waiting)
                self.waiting.clear()
                break
            seq.kv_reserved = need
            self.kv_used += need
            seq.cached_tokens = self.prefix_cache.lookup(seq.block_hashes, seq.prompt_len)
            self.stats.admitted(seq.prompt_len, now - seq.ready_at)
            seq.state = "running"
            self.running.append(seq)
        self.waiting = kept

    def _start_step(self, start: float, now: float) -> None:
        p = self.params
        self._admit(now)
        budget = p.max_num_batched_tokens
        plan: list[tuple[Sequence, int]] = []
        prefill_tokens = 0
        context_tokens = 0
        decodes = firsts = 0  # output tokens the step ends with: one per decode, one per finished prompt
        if not p.chunked_prefill and any(
            s.prompt_len - s.cached_tokens - s.prefilled > 0 and s.held_until <= now for s in self.running
        ):
            budget = 0  # vLLM V0 without chunked prefill: a prefill step pauses every decode
            for seq in self.running:
                remaining = seq.prompt_len - seq.cached_tokens - seq.prefilled
                if remaining > 0 and seq.held_until <= now:
                    plan.append((seq, remaining))
                    prefill_tokens += remaining
                    firsts += 1
        # Decodes first (vLLM's chunked-prefill policy), then prefills in arrival order.
        for seq in self.running:
            if seq.held_until > now or seq.cached_tokens + seq.prefilled < seq.prompt_len:
                continue
            if budget <= 0:
                break
            plan.append((seq, 0))
            budget -= 1
            decodes += 1
            context_tokens += seq.prompt_len + seq.generated
        for seq in self.running:
            remaining = seq.prompt_len - seq.cached_tokens - seq.prefilled
            if remaining <= 0 or seq.held_until > now:
                continue
            if budget <= 0:
                break
            chunk = min(remaining, budget)
            plan.append((seq, chunk))
            budget -= chunk
            prefill_tokens += chunk
            firsts += chunk == remaining
        if not plan:
            return
        duration_ms = (
            p.step_base_ms
            + p.step_per_seq_ms * len(plan)
            + p.step_per_prefill_token_ms * prefill_tokens
            + p.step_per_context_token_ms * context_tokens
        )
        if self.gpu is not None:
            duration_ms *= self.gpu.slowdown(start)
            self.gpu.on_step(start, duration_ms / 1000.0, prefill_tokens, decodes, firsts)
        self._step_plan = plan
        self._step_end = start + duration_ms / 1000.0

    @property
    def num_running(self) -> int:
        return len(self.running)

    @property
    def num_waiting(self) -> int:
        return len(self.waiting) + len(self.held)

    @property
    def kv_usage(self) -> float:
        return self.kv_used / self.params.kv_capacity_tokens

    @property
    def kv_capacity(self) -> int:
        return self.params.kv_capacity_tokens
