"""Is the client, not the server, limiting the run? Each process watches its own event loop.

A greenlet sleeps ``TICK_S`` at a time and records how late it wakes up (event-loop lag: time
the loop spent on other work it could not interrupt) and the process's CPU use over each
report interval. A process is *client-limited* when its CPU use is above ``CPU_LIMIT`` % of a
core or its loop lag p90 is above ``LAG_LIMIT_MS`` (a sustained lag, not one stall such as
building prompts when users start): then requests start late and the load the test asked for
is not the load the server got. Except when errors dominate (:func:`errors_dominate`): then the
server's failures come first and the client is not blamed.

Usage::

    health = ClientHealth(); health.start()
    health.take()   # -> {"cpu": 37.5, "lag_p90_ms": 0.4, "lag_p99_ms": 0.8, "lag_max_ms": 2.1, "limited": False}
"""

from __future__ import annotations

import time
from typing import Any

import gevent

TICK_S = 0.05
CPU_LIMIT = 90.0
LAG_LIMIT_MS = 20.0
ERROR_SHARE = 0.5  # errors dominate a window when at least this share of its finished requests failed
MIN_ERRORS = 5
MIN_JUDGED_S = 1.0  # shorter intervals are not judged client-limited


def is_limited(cpu: float, lag_p90_ms: float) -> bool:
    return cpu > CPU_LIMIT or lag_p90_ms > LAG_LIMIT_MS


def errors_dominate(finished: int, errors: int) -> bool:
    """Most requests failed: the server (or the way to it), not the client, set the pace. A
    client busy with a stream of instant failures is not client-limited: it is not measuring."""
    return errors >= MIN_ERRORS and errors >= ERROR_SHARE * finished


def describe(sample: dict[str, Any]) -> str:
    return (f"CPU {sample['cpu']:.0f} %, event-loop lag p90 {sample['lag_p90_ms']:.1f} ms, "
            f"p99 {sample['lag_p99_ms']:.1f} ms")


class ClientHealth:
    def __init__(self) -> None:
        self._lags: list[float] = []
        self._cpu0 = time.process_time()
        self._wall0 = time.monotonic()
        self._greenlet: gevent.Greenlet | None = None

    def start(self) -> None:
        if self._greenlet is None or self._greenlet.dead:
            self._cpu0, self._wall0 = time.process_time(), time.monotonic()
            self._lags = []
            self._greenlet = gevent.spawn(self._watch)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None

    def _watch(self) -> None:
        while True:
            t = time.monotonic()
            gevent.sleep(TICK_S)
            self._lags.append(max(0.0, time.monotonic() - t - TICK_S) * 1000.0)
            if len(self._lags) > 10_000:
                del self._lags[:5_000]

    def take(self) -> dict[str, Any]:
        """CPU and loop lag since the last call."""
        cpu1, wall1 = time.process_time(), time.monotonic()
        wall = max(wall1 - self._wall0, 1e-6)
        cpu = (cpu1 - self._cpu0) / wall * 100.0
        self._cpu0, self._wall0 = cpu1, wall1
        lags, self._lags = sorted(self._lags), []

        def pct(q: float) -> float:
            return lags[min(len(lags) - 1, int(len(lags) * q))] if lags else 0.0

        # A sliver of an interval (the last sample, taken as the run stops) holds a lag or two:
        # one stall there is not a sustained lag, so it is not judged.
        judged = wall >= MIN_JUDGED_S
        return {"cpu": round(cpu, 1), "lag_p90_ms": round(pct(0.90), 2), "lag_p99_ms": round(pct(0.99), 2),
                "lag_max_ms": round(lags[-1], 2) if lags else 0.0,
                "limited": judged and is_limited(cpu, pct(0.90))}
