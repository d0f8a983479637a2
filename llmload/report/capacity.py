"""Capacity under SLOs, cost and the fleet plan: plain arithmetic on step entries. Pure.

* capacity: the highest *measured* step (by users) that meets every SLO; ``limited_by`` names
  the SLO(s) the next higher step breaks. ``interpolated_rps`` estimates where, between those
  two steps, the limiting metric would reach its limit (linear); it is never used for cost.
* cost at capacity, for a replica of ``gpus_per_replica`` GPUs at ``gpu_hourly_usd`` each:
  usd_per_hour = gpu_hourly_usd × gpus_per_replica; usd_per_request = usd_per_hour / (rps × 3600);
  usd_per_good_request uses goodput_rps; usd_per_million_output_tokens =
  usd_per_hour / (output_tps × 3600) × 10⁶; usd_per_million_total_tokens likewise with total_tps.
  With ``output_cost_weight`` w (an output token costs w input tokens) the hour is split over
  input_tps + w × output_tps token-equivalents to price input and output tokens separately.
* plan: target_rps (or daily_requests × peak_factor / 86 400); each replica runs at most
  (1 − headroom) of its capacity: replicas = ⌈target_rps / (capacity_rps × (1 − headroom))⌉,
  gpus = replicas × gpus_per_replica, usd_per_month = gpus × gpu_hourly_usd × 730.
"""

from __future__ import annotations

import math
from typing import Any

HOURS_PER_MONTH = 730.0


def _point(step: dict[str, Any]) -> dict[str, Any]:
    return {"users": step["users"], "arrival_rate": step.get("arrival_rate"), "level": step.get("level", step["users"]),
            "rps": step["rps"], "output_tps": step["output_tps"], "total_tps": step["total_tps"],
            "goodput_rps": step["goodput_rps"]}


def find_capacity(steps: list[dict[str, Any]], has_slos: bool) -> dict[str, Any]:
    """Steps are ordered by their load level (users, or arrival rate for open-loop runs)."""
    ordered = sorted(steps, key=lambda s: (s.get("level", s["users"]), s["start_time"]))
    if not ordered:
        return {"users": None, "rps": None, "output_tps": None, "limited_by": "no measured step"}
    if not has_slos:
        best = max(ordered, key=lambda s: s["rps"])
        return {**_point(best), "limited_by": "no SLO given: the step with the highest throughput"}
    meeting = [s for s in ordered if s["slo_met"]]
    if not meeting:
        first = ordered[0]
        broken = [k for k, v in first["slo"].items() if not v["met"]]
        return {"users": None, "rps": None, "output_tps": None,
                "limited_by": ", ".join(broken) + f" (broken already at the lowest step, {first['users']} users)"}
    cap = meeting[-1]
    level = cap.get("level", cap["users"])
    above = [s for s in ordered if s.get("level", s["users"]) > level]
    out = _point(cap)
    if not above:
        out["limited_by"] = "highest step tested (no step above it broke an SLO)"
        return out
    nxt = above[0]
    broken = [k for k, v in nxt["slo"].items() if not v["met"]]
    out["limited_by"] = ", ".join(broken) if broken else "unknown"
    out["next_step_users"] = nxt["users"]
    out["next_step_level"] = nxt.get("level", nxt["users"])
    est = interpolate(cap, nxt, broken)
    if est is not None:
        out["interpolated_rps"] = round(est, 4)
    return out


def interpolate(cap: dict[str, Any], nxt: dict[str, Any], broken: list[str]) -> float | None:
    """rps where the first broken SLO's metric reaches its limit, linear between the steps."""
    fractions = []
    for name in broken:
        a, b = cap["slo"][name]["value"], nxt["slo"][name]["value"]
        limit = cap["slo"][name]["limit"]
        if a is None or b is None or b <= a:
            continue
        fractions.append(min(max((limit - a) / (b - a), 0.0), 1.0))
    if not fractions or nxt["rps"] <= cap["rps"]:
        return None  # no throughput gained past capacity: nothing to estimate between the steps
    f = min(fractions)
    return cap["rps"] + f * (nxt["rps"] - cap["rps"])


def cost_at(capacity: dict[str, Any], gpu_hourly_usd: float, gpus_per_replica: int,
            input_tps: float | None = None, output_cost_weight: float | None = None) -> dict[str, Any]:
    usd_per_hour = gpu_hourly_usd * gpus_per_replica
    out: dict[str, Any] = {"usd_per_hour": round(usd_per_hour, 6), "gpus_per_replica": gpus_per_replica}

    def per(rate: float | None, scale: float = 1.0) -> float | None:
        if not rate or rate <= 0:
            return None
        return round(usd_per_hour / (rate * 3600.0) * scale, 8)

    out["usd_per_request"] = per(capacity.get("rps"))
    out["usd_per_good_request"] = per(capacity.get("goodput_rps"))
    out["usd_per_million_output_tokens"] = per(capacity.get("output_tps"), 1e6)
    out["usd_per_million_total_tokens"] = per(capacity.get("total_tps"), 1e6)
    if output_cost_weight is not None and input_tps is not None and capacity.get("output_tps"):
        units = input_tps + output_cost_weight * capacity["output_tps"]
        unit = per(units, 1e6)
        out["output_cost_weight"] = output_cost_weight
        out["usd_per_million_input_tokens"] = unit
        out["usd_per_million_output_tokens_weighted"] = None if unit is None else round(unit * output_cost_weight, 8)
    return out


def plan_for(capacity_rps: float | None, target_rps: float, headroom: float, gpus_per_replica: int,
             gpu_hourly_usd: float | None) -> dict[str, Any]:
    if not 0 <= headroom < 1:
        raise ValueError(f"--headroom {headroom}: expected a fraction in [0, 1), e.g. 0.3")
    out: dict[str, Any] = {"target_rps": round(target_rps, 6), "headroom": headroom}
    if not capacity_rps or capacity_rps <= 0:
        out.update({"replicas": None, "gpus": None, "usd_per_month": None,
                    "note": "no capacity under the SLOs: no plan"})
        return out
    per_replica = capacity_rps * (1.0 - headroom)
    replicas = max(1, math.ceil(target_rps / per_replica - 1e-9))
    out["rps_per_replica"] = round(per_replica, 6)
    out["replicas"] = replicas
    out["gpus"] = replicas * gpus_per_replica
    out["usd_per_month"] = None if gpu_hourly_usd is None else round(out["gpus"] * gpu_hourly_usd * HOURS_PER_MONTH, 2)
    return out
