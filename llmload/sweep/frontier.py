"""The sweep's answer, as arithmetic on the cells' results. Pure.

* points: every measured step of every finished cell, per workload, with output tok/s per GPU
  (``output_tps / gpus``), output tok/s per user (``output_tps / users``: what one user's stream
  gets), TTFT p95, and the price of the step's throughput: $ per 1M output tokens
  (``gpu_hourly_usd × gpus / (output_tps × 3600) × 10⁶``) and $ per good request (goodput).
* pareto: a point no other point of its workload beats on both tok/s per GPU and tok/s per user
  (at least as high on both, higher on one).
* best: per workload, the deployment that meets every SLO at the target load for the least money:
  replicas = ⌈target ÷ (capacity × (1 − headroom))⌉ (capacity in req/s for ``target_rps``, users for
  ``target_users``; without a target, one replica, ranked by $ per 1M output tokens at capacity).
  With repeats the deployment's cost is the median over them, and ``margin_is_real`` says whether
  the runner-up's cheapest repeat still costs more than the best's dearest one (the intervals do
  not overlap); with one repeat it is None: there is no noise estimate.

Usage::

    points = frontier_points(cells)                  # {"chat": [{"deployment": ..., "pareto": True}, ...]}
    best = best_deployments(cells, target_rps=20, target_users=None, headroom=0.3)
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Any

from llmload.metrics import catalog

HOURS_PER_MONTH = 730.0

TTFT_P95 = catalog.BY_NAME["ttft"].key("p95")  # sweep.json's ttft_p95_ms
TPOT_P95 = catalog.BY_NAME["tpot"].key("p95")


def pareto_flags(xy: list[tuple[float, float]]) -> list[bool]:
    """True for each point no other point dominates (maximising both coordinates)."""
    out = []
    for i, (x, y) in enumerate(xy):
        dominated = any(a >= x and b >= y and (a > x or b > y) for j, (a, b) in enumerate(xy) if j != i)
        out.append(not dominated)
    return out


def _per(usd_per_hour: float, rate: float | None, scale: float = 1.0) -> float | None:
    if not rate or rate <= 0:
        return None
    return round(usd_per_hour / (rate * 3600.0) * scale, 8)


def frontier_points(cells: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    by_workload: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in cells:
        if c.get("status") != "done":
            continue
        usd_per_hour = c["gpu_hourly_usd"] * c["gpus"]
        for s in c["steps"]:
            if s["thin"] or not s["output_tps"] or not s["users"]:
                continue
            by_workload[c["workload"]].append({
                "deployment": c["deployment"], "cell": c["id"], "repeat": c["repeat"], "load": s["level"],
                "tok_s_per_gpu": round(s["output_tps"] / c["gpus"], 3),
                "tok_s_per_user": round(s["output_tps"] / s["users"], 3),
                TTFT_P95: s[TTFT_P95], TPOT_P95: s[TPOT_P95], "slo_met": s["slo_met"],
                "usd_per_1m_output_tokens": _per(usd_per_hour, s["output_tps"], 1e6),
                "usd_per_good_request": _per(usd_per_hour, s["goodput_rps"])})
    for points in by_workload.values():
        for p, flag in zip(points, pareto_flags([(p["tok_s_per_gpu"], p["tok_s_per_user"]) for p in points]),
                           strict=True):
            p["pareto"] = flag
    return dict(by_workload)


def _fleet(cell: dict[str, Any], target_rps: float | None, target_users: float | None,
           headroom: float) -> dict[str, Any] | None:
    """Replicas, GPUs and $/month for one cell at the target; None when it has no capacity."""
    cap = cell.get("capacity") or {}
    value = cap.get("rps") if target_users is None else cap.get("users")
    if not value or value <= 0:
        return None
    target = target_rps if target_users is None else target_users
    replicas = 1 if target is None else max(1, math.ceil(target / (value * (1.0 - headroom)) - 1e-9))
    gpus = replicas * cell["gpus"]
    per_1m = _per(cell["gpu_hourly_usd"] * cell["gpus"], cap.get("output_tps"), 1e6)
    return {"replicas": replicas, "gpus": gpus, "usd_per_month": round(gpus * cell["gpu_hourly_usd"] * HOURS_PER_MONTH,
                                                                      2),
            "usd_per_1m_output_tokens": per_1m, "capacity": value}


def best_deployments(cells: list[dict[str, Any]], target_rps: float | None, target_users: float | None,
                     headroom: float, fleets: dict[str, list[dict[str, Any]]] | None = None,
                     ) -> dict[str, dict[str, Any]]:
    """``fleets``: each fleet policy's answer (:func:`llmload.sweep.fleet.summary.fleet_options`), ranked
    with the one-server deployments; a fleet's own cells are not options by themselves."""
    runs: dict[str, dict[str, list[dict[str, Any]]]] = defaultdict(lambda: defaultdict(list))
    fleets = fleets or {}
    for c in cells:
        if c.get("status") == "done" and not c.get("replicas"):
            runs[c["workload"]][c["deployment"]].append(c)
    for workload in fleets:
        runs.setdefault(workload, defaultdict(list))
    priced = target_rps is not None or target_users is not None
    out = {}
    for workload, by_dep in runs.items():
        options = list(fleets.get(workload, []))
        for dep, repeats in by_dep.items():
            planned = [f for f in (_fleet(c, target_rps, target_users, headroom) for c in repeats) if f]
            if len(planned) < len(repeats):  # a repeat without capacity: this deployment does not hold the SLO
                continue
            key = "usd_per_month" if priced else "usd_per_1m_output_tokens"
            costs = [f[key] for f in planned if f[key] is not None]
            if not costs:
                continue
            mid = statistics.median(costs)
            chosen = min(planned, key=lambda f, m=mid: abs(f[key] - m))
            options.append({"deployment": dep, "cost": mid, "low": min(costs), "high": max(costs),
                            "repeats": len(costs), **chosen})
        options.sort(key=lambda o: (o["cost"], o["usd_per_1m_output_tokens"] or math.inf, o["deployment"]))
        if not options:
            out[workload] = {"deployment": None, "replicas": None, "gpus": None, "usd_per_month": None,
                             "runner_up": None, "margin_is_real": None,
                             "note": "no deployment met every SLO at any step"}
            continue
        best, second = options[0], (options[1] if len(options) > 1 else None)
        real = None
        if second is not None and best["repeats"] > 1 and second["repeats"] > 1:
            real = second["low"] > best["high"]
        out[workload] = {
            "deployment": best["deployment"], "replicas": best["replicas"], "gpus": best["gpus"],
            "usd_per_month": best["usd_per_month"] if priced else None,
            "usd_per_1m_output_tokens": best["usd_per_1m_output_tokens"],
            "capacity": best["capacity"], "capacity_unit": "users" if target_users is not None else "req/s",
            "cost_interval": [best["low"], best["high"]],
            "runner_up": None if second is None else {
                "deployment": second["deployment"], "replicas": second["replicas"], "gpus": second["gpus"],
                "usd_per_month": second["usd_per_month"] if priced else None,
                "usd_per_1m_output_tokens": second["usd_per_1m_output_tokens"],
                "cost_interval": [second["low"], second["high"]]},
            "margin_is_real": real,
            "ranked_by": "usd_per_month" if priced else "usd_per_1m_output_tokens at capacity (no target given)",
            "considered": [o["deployment"] for o in options]}
    return out
