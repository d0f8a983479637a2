"""The mock's scheduling policies (``--scheduling``) and its bounded queue (``--max-queue``). Pure.

``fcfs`` (the default) is :class:`~llmload.mock.engine.batching_engine.BatchingEngine` as it is: requests are
admitted in arrival order, the first one that does not fit blocks those behind it.

``priority`` is vLLM's ``--scheduling-policy priority`` (``vllm/v1/core/sched/request_queue.py``
``PriorityRequestQueue``; ``scheduler.py``): the waiting queue is ordered by the request body's
``priority`` (a *lower* value first), then by arrival. When the batch is full (``max_num_seqs``
running, or their KV reservations leave no room) and the head of the queue is of a more urgent
class than the least urgent running request, that request is preempted: vLLM's victim, the
running request with the largest ``(priority, arrival)``, then the next, until the head fits; none
is preempted when the head would not fit even with every less urgent running request gone (they
would lose their progress and admit nothing). A preempted request goes back to the waiting queue
and resumes by *recompute* (vLLM's default preemption mode): its KV is freed, and on re-admission its
prompt and the tokens it already generated are prefilled again (the prompt's blocks may still be
in the prefix cache) before it produces its next token. Each preemption counts in
``vllm:num_preemptions``. (vLLM itself preempts when KV blocks run out mid-run; the mock reserves a
request's whole KV footprint at admission, so its equivalent moment is admission into a full
batch.) Requests of the same class never preempt each other.

The bounded queue: with ``--max-queue N`` an arrival is turned away (429) when at least N requests
would wait ahead of it: every waiting request under ``fcfs``, the waiting requests of its own or a
more urgent class under ``priority``, so the least urgent class is shed first.

Usage::

    engine = make_engine(EngineParams(max_num_seqs=8), "priority")
    engine.submit(EngineRequest(prompt_words=["hi"] * 100, output_tokens=8, priority=0), now=0.0)
    sheds(waiting_priorities(engine), priority=5, max_queue=64, policy="priority")   # False
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

from llmload.mock.engine.batching_engine import BatchingEngine
from llmload.mock.engine.engine_base import EngineParams, Sequence

POLICIES = ("fcfs", "priority")
SHED_STATUS = 429  # what a shed request gets (the Gateway API inference extension answers shed requests 429)


def queue_key(seq: Sequence) -> tuple[int, float, int]:
    """vLLM's order of requests under the priority policy: priority, then arrival (then the id: ties)."""
    return (seq.request.priority, seq.arrival, seq.seq_id)


def pick_victim(running: Iterable[Sequence], arrival: Sequence) -> Sequence | None:
    """The running request to preempt for ``arrival``: the least urgent and latest (vLLM's
    ``max(running, key=(priority, arrival_time))``), if its class is less urgent than the arrival's."""
    victim = max(running, key=queue_key, default=None)
    if victim is None or victim.request.priority <= arrival.request.priority:
        return None
    return victim


def sheds(waiting: Iterable[int], priority: int, max_queue: int | None, policy: str) -> bool:
    """Whether an arrival of ``priority`` is turned away: ``max_queue`` or more requests (of
    ``waiting``, their priorities) would wait ahead of it. None: the queue is unbounded."""
    if max_queue is None:
        return False
    ahead = sum(1 for p in waiting if policy == "fcfs" or p <= priority)
    return ahead >= max_queue


def waiting_priorities(engine: object) -> list[int]:
    """The priorities of the requests waiting for an engine: its queue (the fixed engine has none), and
    those the front holds for a LoRA adapter's slot (``held``), which vLLM has in its queue too."""
    return [s.request.priority for s in getattr(engine, "waiting", ())] + list(getattr(engine, "held", ()))


class PriorityEngine(BatchingEngine):
    """:class:`BatchingEngine` with vLLM's priority policy: the queue in priority order, and preemption."""

    def __init__(self, params: EngineParams) -> None:
        super().__init__(params)
        self._resumed: set[int] = set()  # preempted sequences waiting to resume: their queue time is counted once

    def _fits(self, seq: Sequence) -> bool:
        p = self.params
        need = seq.prompt_len + seq.request.output_tokens
        return len(self.running) < p.max_num_seqs and (
            not self.running or self.kv_used + need <= p.kv_capacity_tokens)

    def _fits_once_victims_go(self, seq: Sequence) -> bool:
        """Whether ``seq`` would fit with every running request of a less urgent class gone: the only
        preemptions that can admit it. If not, none is made (a victim would lose its progress for nothing)."""
        p = self.params
        victims = [s for s in self.running if s.request.priority > seq.request.priority]
        left = len(self.running) - len(victims)
        kv = self.kv_used - sum(s.kv_reserved for s in victims)
        need = seq.prompt_len + seq.request.output_tokens
        return left < p.max_num_seqs and (left == 0 or kv + need <= p.kv_capacity_tokens)

    def _preempt(self, victim: Sequence) -> None:
        self.running.remove(victim)
        self.kv_used -= victim.kv_reserved
        victim.kv_reserved = 0
        victim.state = "waiting"
        # Recompute: the prompt and every token generated so far are prefilled again before the next
        # token (prefilled counts from -generated, so the prefill ends at prompt_len as for a new request)
        victim.prefilled = -victim.generated
        victim.cached_tokens = 0
        self._resumed.add(victim.seq_id)
        self.stats.preemptions += 1
        self.waiting.append(victim)

    def _could_admit(self) -> bool:
        head = min((s for s in self.waiting if s.ready_at <= self._now), key=queue_key, default=None)
        return head is not None and self._fits_once_victims_go(head)

    def _admit(self, now: float) -> None:
        ready = sorted((s for s in self.waiting if s.ready_at <= now), key=queue_key)
        if not ready:
            return
        admitted: set[int] = set()
        for seq in ready:
            if not self._fits_once_victims_go(seq):
                break  # the head that cannot run blocks the less urgent ones behind it, as vLLM's queue does
            while not self._fits(seq):  # the victims free enough: preempt only as many as it takes
                victim = pick_victim(self.running, seq)
                assert victim is not None
                self._preempt(victim)
            seq.kv_reserved = seq.prompt_len + seq.request.output_tokens
            self.kv_used += seq.kv_reserved
            seq.cached_tokens = self.prefix_cache.lookup(seq.block_hashes, seq.prompt_len)
            if seq.seq_id in self._resumed:
                self._resumed.discard(seq.seq_id)
            else:
                self.stats.admitted(seq.prompt_len, now - seq.ready_at)
            seq.state = "running"
            self.running.append(seq)
            admitted.add(seq.seq_id)
        if admitted:
            self.waiting = deque(s for s in self.waiting if s.seq_id not in admitted)
            self.running.sort(key=queue_key)  # the step's prefill budget goes to the most urgent first

    def abort(self, seq: Sequence) -> None:
        self._resumed.discard(seq.seq_id)
        super().abort(seq)


def make_engine(params: EngineParams, policy: str = "fcfs") -> BatchingEngine:
    """The batching engine of ``--scheduling POLICY``."""
    if policy not in POLICIES:
        raise ValueError(f"--scheduling {policy!r}: expected one of {', '.join(POLICIES)}")
    return PriorityEngine(params) if policy == "priority" else BatchingEngine(params)
