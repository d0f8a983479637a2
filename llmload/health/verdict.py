"""Is the client, not the server, limiting the run, and why? Pure: judged from one interval's
sample, which :class:`llmload.health.sampler.ClientHealth` takes in each process.

Over each report interval a process is *client-limited* when its CPU use is above ``CPU_LIMIT`` % of
a core, its loop lag p90 is above ``LAG_LIMIT_MS`` (a sustained lag, not one stall such as building
prompts when users start), or, with a calibration of this host, it streams more tokens/s than
``llmload calibrate`` found one process keeps within the tolerances, or its own signals (loop lag,
stall CPU, coalesced-read share) pass what the calibration's curve allows at its load
(:meth:`~llmload.health.calibration.Calibration.signals_over`); except when errors dominate
(:func:`errors_dominate`): then the server's failures come first and the client is not blamed.
The *cause* decides the advice:

* ``process``: this process is busy: add worker processes (``--processes``);
* ``machine``: the machine is busy (steal, a run queue longer than the cores, or other processes
  on this process's cores) while this process is not: free the machine; more processes will not help;
* ``calibrated``: above the calibrated rate per process, or signals past the curve's allowance at
  this load; the advice names the tolerance the calibration was made for: add worker processes;
* ``stalls``: the loop stalls though neither this process nor the machine is busy: the stall's
  culprit says what blocks it.

Each advice is ``reason: action``; the action per cause is :data:`ACTION`, so a run's verdict
(:mod:`llmload.health.run_verdict`) can give the reasons of its intervals and each action once.

Usage::

    limited, cause, advice = verdict({"cpu": 97.0, "lag_p90_ms": 3.1, ...}, calibration)
    # -> (True, "process", "this process is busy (CPU 97 % of a core): add worker processes (--processes)")
    describe(sample)            # "CPU 97 %, event-loop lag p90 3.1 ms, p99 ...; <advice>"
    describe(sample, action=False)   # "...; this process is busy (CPU 97 % of a core)"
    errors_dominate(finished=40, errors=31)   # True: the server's failures come first
"""

from __future__ import annotations

from typing import Any

from llmload.health.calibration import Calibration

CPU_LIMIT = 90.0
LAG_LIMIT_MS = 20.0
ERROR_SHARE = 0.5  # errors dominate a window when at least this share of its finished requests failed
MIN_ERRORS = 5
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


ACTION = {
    "process": "add worker processes (--processes)",
    "machine": "free the machine or run the load generator on another; more worker processes will not help",
    "calibrated": "add worker processes (--processes)",
    "stalls": "move that work out of the event loop, or make it smaller",
}
"""What to do, per cause: the second half of every advice (``reason: action``), said once per run."""


def verdict(s: dict[str, Any], cal: Calibration | None = None) -> tuple[bool, str, str]:
    """(limited, cause, advice) for one interval's sample; the advice is ``reason: action``
    (:data:`ACTION`). Pure."""
    over_rate = cal is not None and cal.exceeded_by(s.get("tps"), s.get("streams"))
    over_signals = cal.signals_over(s) if cal is not None and not over_rate else {}
    over_cal = over_rate or bool(over_signals)
    if not (is_limited(s["cpu"], s["lag_p90_ms"]) or over_cal):
        return False, "", ""
    # Stall CPU is this process's own work inside one loop turn: a busy machine stretches turns, it
    # does not fill them, so a stall CPU past the curve is the client's even on a busy machine.
    own_stalls = "stall_cpu_max_ms" in over_signals
    if s["cpu"] <= CPU_LIMIT and machine_busy(s) and not own_stalls:
        rq = s.get("run_queue")
        return _judged("machine", (
            f"the machine is busy, not this process (other processes {s.get('others_cpu') or 0:.0f} % of a core on "
            f"its {s.get('cores') or 1} core(s), run queue {'-' if rq is None else f'{rq:.1f}'} for "
            f"{s.get('machine_cores') or '?'} cores, steal {s.get('steal_pct') or 0:.0f} %)"))
    if s["cpu"] > CPU_LIMIT:
        return _judged("process", f"this process is busy (CPU {s['cpu']:.0f} % of a core)")
    if over_cal:
        assert cal is not None
        within = f" within {cal.tolerance}" if cal.tolerance else " exactly"
        if over_rate:
            return _judged("calibrated", (
                f"above what `llmload calibrate` measured one process can time{within} on this machine "
                f"({cal.max_tps:.0f} tok/s, {cal.max_streams} streams; now {s.get('tps') or 0:.0f} tok/s, "
                f"{s.get('streams') or 0} streams)"))
        return _judged("calibrated", (
            f"{', '.join(over_signals.values())}: past what `llmload calibrate` allows at "
            f"{s.get('streams') or 0} streams for timing{within}"))
    culprit = s.get("stall_culprit") or "unknown"
    return _judged("stalls", f"the event loop stalls (max {s.get('stall_max_ms') or 0:.1f} ms, mostly {culprit}) while "
                             "neither this process nor the machine is busy")


def _judged(cause: str, reason: str) -> tuple[bool, str, str]:
    return True, cause, f"{reason}: {ACTION[cause]}"


def reason_of(sample: dict[str, Any]) -> str:
    """The advice of a sample without its action (:data:`ACTION`): why it was limited."""
    advice, action = sample.get("advice") or "", ACTION.get(sample.get("cause") or "", "")
    return advice[: -len(action) - 2] if action and advice.endswith(f": {action}") else advice


def describe(sample: dict[str, Any], action: bool = True) -> str:
    """The sample's CPU and loop lag, and its advice (``action=False``: its reason alone, for a
    text that gives the action once, as the end-of-run verdict does)."""
    text = (f"CPU {sample['cpu']:.0f} %, event-loop lag p90 {sample['lag_p90_ms']:.1f} ms, "
            f"p99 {sample['lag_p99_ms']:.1f} ms")
    why = sample.get("advice") if action else reason_of(sample)
    return f"{text}; {why}" if why else text
