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

from collections import deque

from llmload.mock.engine.engine_base import Emission, EngineBase, EngineParams, EngineRequest, Sequence
from llmload.mock.engine.prefix_cache import BLOCK_SIZE, PrefixCache, prompt_block_hashes


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
