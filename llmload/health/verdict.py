"""Is the client, not the server, limiting the run, and why? Each process watches its own event loop
and the machine it runs on.

A greenlet sleeps ``TICK_S`` at a time and records how late it wakes up (event-loop lag: time the
loop spent on other work it could not interrupt); :mod:`llmload.health.stalls` times every loop turn and
names what ran in the long ones; :mod:`llmload.health.machine` reads steal time, the run queue and other
processes' CPU on this process's cores. Over each report interval a process is *client-limited*
when its CPU use is above ``CPU_LIMIT`` % of a core, its loop lag p90 is above ``LAG_LIMIT_MS``
(a sustained lag, not one stall such as building prompts when users start), or it streams more
tokens/s than ``llmload calibrate`` measured this machine can time exactly; except when errors
dominate (:func:`errors_dominate`): then the server's failures come first and the client is not
blamed. The *cause* decides the advice:

* ``process``: this process is busy: add worker processes (``--processes``);
* ``machine``: the machine is busy (steal, a run queue longer than the cores, or other processes
  on this process's cores) while this process is not: free the machine; more processes will not help;
* ``calibrated``: above the calibrated rate per process: add worker processes;
* ``stalls``: the loop stalls though neither this process nor the machine is busy: the stall's
  culprit says what blocks it.

Usage::

    health = ClientHealth(); health.start()
    health.tokens += 128   # per finished request (the plugin does it)
    health.take(streams=7)   # -> {"cpu": 37.5, "lag_p90_ms": 0.4, ..., "limited": False, "cause": "", "advice": ""}
"""

from __future__ import annotations

import time
from typing import Any

import gevent

from llmload.health.calibration import Calibration
from llmload.health.machine import MachineSampler
from llmload.health.stalls import StallStats, StallWatch

TICK_S = 0.05
RUN_QUEUE_EVERY = 5  # ticks between run-queue samples
CPU_LIMIT = 90.0
LAG_LIMIT_MS = 20.0
ERROR_SHARE = 0.5  # errors dominate a window when at least this share of its finished requests failed
MIN_ERRORS = 5
MIN_JUDGED_S = 1.0  # shorter intervals are not judged client-limited
STEAL_LIMIT_PCT = 10.0  # of this process's cores' time
OTHERS_MIN_CPU = 20.0  # % of a core other processes must take on our cores to count as contention


def is_limited(cpu: float, lag_p90_ms: float) -> bool:
    return cpu > CPU_LIMIT or lag_p90_ms > LAG_LIMIT_MS


def errors_dominate(finished: int, errors: int) -> bool:
    """Most requests failed: the server (or the way to it), not the client, set the pace. A
    client busy with a stream of instant failures is not client-limited: it is not measuring."""
    return errors >= MIN_ERRORS and errors >= ERROR_SHARE * finished


def machine_busy(s: dict[str, Any]) -> bool:
    """Steal, more runnable tasks than cores, or this process's cores full with others' work."""
    steal, others, rq = s.get("steal_pct"), s.get("others_cpu"), s.get("run_queue")
    cores = s.get("cores") or 1
    if steal is not None and steal >= STEAL_LIMIT_PCT:
        return True
    if rq is not None and rq > (s.get("machine_cores") or cores):
        return True
    return others is not None and others >= OTHERS_MIN_CPU and s["cpu"] + others >= CPU_LIMIT * cores


def verdict(s: dict[str, Any], cal: Calibration | None = None) -> tuple[bool, str, str]:
    """(limited, cause, advice) for one interval's sample. Pure."""
    over_cal = cal is not None and cal.exceeded_by(s.get("tps"), s.get("streams"))
    if not (is_limited(s["cpu"], s["lag_p90_ms"]) or over_cal):
        return False, "", ""
    if s["cpu"] <= CPU_LIMIT and machine_busy(s):
        rq = s.get("run_queue")
        return True, "machine", (
            f"the machine is busy, not this process (other processes {s.get('others_cpu') or 0:.0f} % of a core on "
            f"its {s.get('cores') or 1} core(s), run queue {'-' if rq is None else f'{rq:.1f}'} for "
            f"{s.get('machine_cores') or '?'} cores, steal {s.get('steal_pct') or 0:.0f} %): free the machine or run "
            "the load generator on another; more worker processes will not help")
    if s["cpu"] > CPU_LIMIT:
        return True, "process", f"this process is busy (CPU {s['cpu']:.0f} % of a core): add worker processes " \
                                "(--processes)"
    if over_cal:
        assert cal is not None
        return True, "calibrated", (
            f"above what `llmload calibrate` measured one process can time exactly on this machine "
            f"({cal.max_tps:.0f} tok/s, {cal.max_streams} streams; now {s.get('tps') or 0:.0f} tok/s, "
            f"{s.get('streams') or 0} streams): add worker processes (--processes)")
    culprit = s.get("stall_culprit") or "unknown"
    return True, "stalls", (f"the event loop stalls (max {s.get('stall_max_ms') or 0:.1f} ms, mostly {culprit}) while "
                            "neither this process nor the machine is busy: that work blocks the loop")


def describe(sample: dict[str, Any]) -> str:
    text = (f"CPU {sample['cpu']:.0f} %, event-loop lag p90 {sample['lag_p90_ms']:.1f} ms, "
            f"p99 {sample['lag_p99_ms']:.1f} ms")
    return f"{text}; {sample['advice']}" if sample.get("advice") else text


class ClientHealth:
    def __init__(self, calibration: Calibration | None = None) -> None:
        self.calibration = calibration
        self.tokens = 0  # output tokens of finished requests since the last take
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
            self.tokens = 0
            self.machine.start()
            self.stalls.start()
            self.stalls.take()
            self._greenlet = gevent.spawn(self._watch)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None
        self.stalls.stop()

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
        stalls: StallStats = self.stalls.take()

        def pct(q: float) -> float:
            return lags[min(len(lags) - 1, int(len(lags) * q))] if lags else 0.0

        sample: dict[str, Any] = {
            "cpu": round(cpu, 1), "lag_p90_ms": round(pct(0.90), 2), "lag_p99_ms": round(pct(0.99), 2),
            "lag_max_ms": round(lags[-1], 2) if lags else 0.0, "tps": round(tokens / wall, 1),
            "streams": streams, "stalls_over_2ms": stalls.count, "stall_max_ms": round(stalls.max_ms, 2),
            "stall_cpu_max_ms": round(stalls.max_cpu_ms, 2), "stall_culprit": stalls.top_culprit(),
            "stalls": stalls.to_wire(), **self.machine.take(cpu),
        }
        sample["limited"], sample["cause"], sample["advice"] = verdict(sample, self.calibration)
        if wall < MIN_JUDGED_S:
            # A sliver of an interval (the last sample, taken as the run stops) holds a lag or two:
            # one stall there is not a sustained lag, so it is not judged.
            sample["limited"], sample["cause"], sample["advice"] = False, "", ""
        return sample
