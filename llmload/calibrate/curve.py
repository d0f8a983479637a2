"""The calibration's curve: per stream count measured, the accuracy and the client's own signals.
Pure. The live client-limited verdict reads it back (:mod:`llmload.health.calibration`): what the
loop lag, the stall CPU and the coalesced-read share were where the tolerances still held.

Usage::

    points = curve(steps, tolerances)   # one point per stream count, lowest first
    points[0]["streams"], points[0]["share"], points[0]["ok"], points[0]["lag_p99_ms"]
"""

from __future__ import annotations

from typing import Any

from llmload.calibrate.tolerance import Tolerances, combine, judge

POINT_KEYS = ("streams", "tps_per_process", "in_flight", "cpu_pct", "ttft_err_p50_ms", "ttft_err_p99_ms",
              "itl_max_err_p99_ms", "ttft_share", "itl_max_share", "share", "lag_p99_ms", "stalls",
              "stall_cpu_max_ms", "coalesced_share")


def curve(steps: list[dict[str, Any]], tol: Tolerances) -> list[dict[str, Any]]:
    """One point per stream count of one process count (the first step's): a level measured more
    than once (a confirmation) takes the median over all its repeats, and is ok only if every
    measurement of it was."""
    if not steps:
        return []
    processes = steps[0].get("processes", 1)
    by_level: dict[int, list[dict[str, Any]]] = {}
    for x in steps:
        if x.get("processes", 1) == processes:
            by_level.setdefault(int(x["streams"]), []).append(x)
    points = []
    for streams in sorted(by_level):
        measured = by_level[streams]
        runs = [r for x in measured for r in x.get("runs", [x])]
        merged = combine(runs)
        ok = all(x["ok"] for x in measured) and judge(merged, tol)[0]
        points.append({**{k: merged.get(k) for k in POINT_KEYS}, "ok": ok, "measured": len(measured)})
    return points
