"""The client watching itself, inside each Locust process: its event loop, its CPU and the machine
it runs on, sampled over each report interval and judged by :mod:`llmload.health.verdict`.

A greenlet sleeps ``TICK_S`` at a time and records how late it wakes up (event-loop lag: time the
loop spent on other work it could not interrupt); :mod:`llmload.health.stalls` times every loop turn and
names what ran in the long ones; :mod:`llmload.health.machine` reads steal time, the run queue and other
processes' CPU on this process's cores.

Usage::

    health = ClientHealth(); health.start()
    health.finished(record)  # per finished request (the plugin does it): tokens, coalesced reads, timing
    health.take(streams=7)   # -> {"cpu": 37.5, "lag_p90_ms": 0.4, ..., "limited": False, "cause": "", "advice": ""}
"""

from __future__ import annotations

import time
from typing import Any

import gevent

from llmload.health.calibration import Calibration
from llmload.health.machine import MachineSampler
from llmload.health.run_verdict import new_timing
from llmload.health.stalls import StallStats, StallWatch
from llmload.health.verdict import verdict
from llmload.metrics.record import RequestRecord

TICK_S = 0.05
RUN_QUEUE_EVERY = 5  # ticks between run-queue samples
MIN_JUDGED_S = 1.0  # shorter intervals are not judged client-limited


class ClientHealth:
    def __init__(self, calibration: Calibration | None = None) -> None:
        self.calibration = calibration
        self.tokens = 0  # output tokens of finished requests since the last take
        self.coalesced = 0  # ... and their reads that carried several tokens (gaps that cannot be known)
        self.timing = new_timing()  # finished requests, and those whose timing a stall may have moved
        self._lags: list[float] = []
        self._cpu0 = time.process_time()
        self._wall0 = time.monotonic()
        self._greenlet: gevent.Greenlet | None = None
        self.stalls = StallWatch()
        self.machine = MachineSampler()

    def start(self) -> None:
        if self._greenlet is None or self._greenlet.dead:
            self._cpu0, self._wall0 = time.process_time(), time.monotonic()
            self._lags = []
            self.tokens = self.coalesced = 0
            self.timing = new_timing()
            self.machine.start()
            self.stalls.start()
            self.stalls.take()
            self._greenlet = gevent.spawn(self._watch)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None
        self.stalls.stop()

    def finished(self, rec: RequestRecord) -> None:
        """Account one finished request: its tokens, its coalesced reads, and whether a stall can
        have moved its timings (see :func:`llmload.health.run_verdict.new_timing`)."""
        self.tokens += rec.completion_tokens or 0
        self.coalesced += rec.coalesced_reads
        timing = self.timing
        timing["requests"] += 1
        if rec.coalesced_reads:
            timing["coalesced"] += 1
        if rec.clock_stamped and rec.t0 is not None and rec.e2e_ms is not None \
                and self.stalls.stalled_during(rec.t0, rec.t0 + rec.e2e_ms / 1000.0):
            timing["clock_in_stall"] += 1

    def _watch(self) -> None:
        machine = self.machine
        n = 0
        while True:
            t = time.monotonic()
            gevent.sleep(TICK_S)
            self._lags.append(max(0.0, time.monotonic() - t - TICK_S) * 1000.0)
            n += 1
            if n % RUN_QUEUE_EVERY == 0:  # a file read each time: a few samples a second are enough
                machine.tick()
            if len(self._lags) > 10_000:
                del self._lags[:5_000]

    def take(self, streams: int = 0) -> dict[str, Any]:
        """CPU, loop lag, stalls and the machine's state since the last call (``streams``: in flight
        now), with the verdict."""
        cpu1, wall1 = time.process_time(), time.monotonic()
        wall = max(wall1 - self._wall0, 1e-6)
        cpu = (cpu1 - self._cpu0) / wall * 100.0
        self._cpu0, self._wall0 = cpu1, wall1
        lags, self._lags = sorted(self._lags), []
        tokens, self.tokens = self.tokens, 0
        coalesced, self.coalesced = self.coalesced, 0
        timing, self.timing = self.timing, new_timing()
        stalls: StallStats = self.stalls.take()

        def pct(q: float) -> float:
            return lags[min(len(lags) - 1, int(len(lags) * q))] if lags else 0.0

        sample: dict[str, Any] = {
            "cpu": round(cpu, 1), "lag_p90_ms": round(pct(0.90), 2), "lag_p99_ms": round(pct(0.99), 2),
            "lag_max_ms": round(lags[-1], 2) if lags else 0.0, "tps": round(tokens / wall, 1),
            "coalesced_share": round(coalesced / tokens, 5) if tokens else None,
            "streams": streams, "stalls_over_2ms": stalls.count, "stall_max_ms": round(stalls.max_ms, 2),
            "stall_cpu_max_ms": round(stalls.max_cpu_ms, 2), "stall_culprit": stalls.top_culprit(),
            "stalls": stalls.to_wire(), "timing": timing, "interval_s": round(wall, 3), **self.machine.take(cpu),
        }
        sample["limited"], sample["cause"], sample["advice"] = verdict(sample, self.calibration)
        if wall < MIN_JUDGED_S:
            # A sliver of an interval (the last sample, taken as the run stops) holds a lag or two:
            # one stall there is not a sustained lag, so it is not judged.
            sample["limited"], sample["cause"], sample["advice"] = False, "", ""
        return sample
