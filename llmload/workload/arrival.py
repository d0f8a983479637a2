"""Open-loop arrivals: a process-wide ticket stream at a rate, for users to send on.

Gaps between arrivals are Gamma-distributed with shape ``burstiness`` and mean 1/rate
(burstiness 1 is a Poisson process; below 1 burstier, above 1 more regular), as in vLLM's
``--burstiness``. The gate's greenlet puts each arrival's scheduled Unix time in a queue at
that time; a free user takes the oldest one and sends. When every user is busy, tickets wait:
the row's ``scheduled_time`` then lies before its ``start_time``, so client lag is visible.

Usage::

    gate = ArrivalGate(rate_per_s=lambda: 5.0, burstiness=1.0, seed=1)
    scheduled = gate.take()      # blocks until an arrival is due
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable

import gevent
import gevent.queue

MAX_BACKLOG = 100_000


class ArrivalGate:
    def __init__(self, rate_per_s: Callable[[], float], burstiness: float, seed: int) -> None:
        self.rate = rate_per_s
        self.shape = burstiness
        self.rng = random.Random(seed)
        self.queue: gevent.queue.Queue = gevent.queue.Queue()
        self.dropped = 0
        self._greenlet: gevent.Greenlet | None = None

    def next_gap(self) -> float:
        rate = self.rate()
        return self.rng.gammavariate(self.shape, 1.0 / (self.shape * rate)) if rate > 0 else 1.0

    def _run(self) -> None:
        t = time.time()
        while True:
            t += self.next_gap()
            delay = t - time.time()
            if delay > 0:
                gevent.sleep(delay)
            if self.queue.qsize() >= MAX_BACKLOG:
                self.dropped += 1  # every user is stuck: do not grow without bound
                continue
            self.queue.put(t)

    def take(self) -> float:
        if self._greenlet is None or self._greenlet.dead:
            self._greenlet = gevent.spawn(self._run)
        return self.queue.get()

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None
        self.queue = gevent.queue.Queue()
