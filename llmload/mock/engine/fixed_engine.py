"""The fixed engine: a constant first-token delay and inter-token interval, every request on its own,
no batching effects. The ground truth for accuracy tests and benchmarks. Pure (clock passed in).

Usage::

    engine = FixedEngine(ttft_ms=50, itl_ms=10)
    seq = engine.submit(EngineRequest(prompt_words=["hi"], output_tokens=8), now=0.0)
    emissions = engine.advance(engine.next_event_time())
"""

from __future__ import annotations

import heapq

from llmload.mock.engine.engine_base import Emission, EngineBase, EngineRequest, Sequence


class FixedEngine(EngineBase):
    """Constant first-token delay and inter-token interval; every request on its own."""

    def __init__(self, ttft_ms: float = 50.0, itl_ms: float = 10.0) -> None:
        super().__init__()
        if ttft_ms < 0 or itl_ms < 0:
            raise ValueError(f"fixed engine: ttft_ms and itl_ms must be >= 0, got {ttft_ms}, {itl_ms}")
        self.ttft_s = ttft_ms / 1000.0
        self.itl_s = itl_ms / 1000.0
        self._heap: list[tuple[float, int, Sequence]] = []
        self._active: set[Sequence] = set()

    def submit(self, request: EngineRequest, now: float) -> Sequence:
        seq = Sequence(seq_id=next(self._ids), request=request, prompt_len=max(1, len(request.prompt_words)),
                       arrival=now, ready_at=now + request.slow_first_s)
        self.stats.submitted(seq.prompt_len, request.output_tokens)
        self.stats.admitted(seq.prompt_len, 0.0)
        if request.output_tokens <= 0:
            seq.state = "finished"
            return seq
        seq.state = "running"
        self._active.add(seq)
        heapq.heappush(self._heap, (seq.ready_at + self.ttft_s, seq.seq_id, seq))
        return seq

    def abort(self, seq: Sequence) -> None:
        if not seq.finished:
            seq.state = "aborted"
            self._active.discard(seq)
            self.stats.requests_aborted += 1

    def next_event_time(self) -> float | None:
        while self._heap and self._heap[0][2].finished:
            heapq.heappop(self._heap)
        return self._heap[0][0] if self._heap else None

    def advance(self, now: float) -> list[Emission]:
        out: list[Emission] = []
        while self._heap and self._heap[0][0] <= now:
            due, _, seq = heapq.heappop(self._heap)
            if seq.finished:
                continue
            self._emit(seq, 1, due, out)
            if seq.finished:
                self._active.discard(seq)
            else:
                nxt = due + self.itl_s
                if seq.held_until > nxt:
                    nxt = seq.held_until
                heapq.heappush(self._heap, (nxt, seq.seq_id, seq))
        return out

    @property
    def num_running(self) -> int:
        return len(self._active)

    @property
    def num_waiting(self) -> int:
        return len(self.held)  # no queue of its own: only requests held for a LoRA adapter's slot

    @property
    def kv_usage(self) -> float:
        return 0.0

    kv_used = 0
    kv_capacity = 0  # no KV model: TGI's KV ratio is then left out
