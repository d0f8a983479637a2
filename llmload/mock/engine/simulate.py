"""Closed-loop runs of an engine on a virtual clock: how a profile behaves, without HTTP.

Used to calibrate profiles and by the tests that pin them; `benchmarks/a800_table.py` checks
the same table over real sockets.
"""

from __future__ import annotations

import heapq
import statistics
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from llmload.mock.engine.engine_base import EngineRequest


@dataclass(frozen=True)
class ClosedLoopResult:
    concurrency: int
    requests: int
    output_tps: float
    ttft_p50_ms: float
    tpot_p50_ms: float


def closed_loop(
    make_engine: Callable[[], object],
    concurrency: int,
    prompts: Sequence[Sequence[str]],
    output_tokens: int,
    requests_per_user: int = 8,
    client_gap_ms: float = 1.0,
    warmup_requests_per_user: int = 1,
) -> ClosedLoopResult:
    """Run ``concurrency`` users, each sending ``requests_per_user`` requests back to back.

    ``client_gap_ms`` is the time a client needs between the end of one stream and the send
    of the next (HTTP round trip, request build). The first ``warmup_requests_per_user`` of
    each user are not measured.
    """
    engine = make_engine()
    gap = client_gap_ms / 1000.0
    arrivals: list[tuple[float, int]] = [(i * 1e-6, i) for i in range(concurrency)]  # (time, user)
    heapq.heapify(arrivals)
    sent = [0] * concurrency
    owner: dict[int, int] = {}
    ttfts: list[float] = []
    tpots: list[float] = []
    measured_tokens = 0
    window_start: float | None = None
    window_end = 0.0
    now = 0.0
    total = concurrency * requests_per_user
    finished = 0
    for _ in range(10_000_000):
        if finished >= total:
            break
        t_engine = engine.next_event_time()
        t_arrival = arrivals[0][0] if arrivals else None
        if t_arrival is not None and (t_engine is None or t_arrival <= t_engine):
            now, user = heapq.heappop(arrivals)
            prompt = prompts[(user + sent[user]) % len(prompts)]
            seq = engine.submit(EngineRequest(prompt_words=prompt, output_tokens=output_tokens), now)
            seq.user = (user, sent[user])
            owner[seq.seq_id] = user
            sent[user] += 1
            continue
        if t_engine is None:
            raise RuntimeError("closed_loop: engine idle with requests outstanding")
        now = t_engine
        for em in engine.advance(now):
            user, index = em.seq.user
            measured = index >= warmup_requests_per_user
            if measured:
                if window_start is None:
                    window_start = now
                measured_tokens += em.tokens
                window_end = now
            if em.finished:
                finished += 1
                seq = em.seq
                if measured:
                    ttfts.append((seq.first_token_time - seq.arrival) * 1000.0)
                    if seq.generated > 1:
                        tpots.append((seq.last_token_time - seq.first_token_time) * 1000.0 / (seq.generated - 1))
                if sent[user] < requests_per_user:
                    heapq.heappush(arrivals, (now + gap, user))
    span = max(window_end - (window_start or 0.0), 1e-9)
    return ClosedLoopResult(
        concurrency=concurrency,
        requests=len(ttfts),
        output_tps=measured_tokens / span,
        ttft_p50_ms=statistics.median(ttfts) if ttfts else float("nan"),
        tpot_p50_ms=statistics.median(tpots) if tpots else float("nan"),
    )
