"""Capacity under SLOs, cost and the fleet plan: plain arithmetic on step entries. Pure.

* capacity: the highest *measured* level that meets every SLO below the first level that breaks
  one (monotone: a passing level above a failing one is noise or an unstable server, reported in
  ``non_monotone``, never capacity). A level passes when every step at it with a verdict met
  every SLO. Thin steps (``thin``: too few ok requests) have no verdict and are skipped; the
  ones above the capacity are listed in ``thin_above``. The capacity's numbers all come from one
  step, the last one at that level (``start_time`` names it). A step marked ``never_capacity``
  (its GPUs throttled, :mod:`llmload.report.sections.gpu`) is skipped as a thin one is, and listed.
  ``limited_by`` names the SLO(s) the first failing level breaks. ``interpolated_rps`` estimates
  where, between the capacity step and that one, the limiting metric would reach its limit
  (linear); it is never used for cost.
* cost at capacity, for a replica of ``gpus_per_replica`` GPUs at ``gpu_hourly_usd`` each:
  usd_per_hour = gpu_hourly_usd × gpus_per_replica; usd_per_request = usd_per_hour / (rps × 3600);
  usd_per_good_request uses goodput_rps; usd_per_million_output_tokens =
  usd_per_hour / (output_tps × 3600) × 10⁶; usd_per_million_total_tokens likewise with total_tps.
  With ``output_cost_weight`` w (an output token costs w input tokens) the hour is split over
  input_tps + w × output_tps token-equivalents to price input and output tokens separately.
  Transcription (rows with ``audio_seconds``): usd_per_audio_hour = usd_per_hour / RTFx at capacity
  (the capacity step's audio seconds per wall-clock second).
* plan: target_rps (or daily_requests × peak_factor / 86 400); each replica runs at most
  (1 − headroom) of its capacity: replicas = ⌈target_rps / (capacity_rps × (1 − headroom))⌉,
  gpus = replicas × gpus_per_replica, usd_per_month = gpus × gpu_hourly_usd × 730.
"""

from __future__ import annotations

import math
from typing import Any

from llmload.metrics.catalog import AUDIO_HOUR_PRICE
from llmload.metrics.step_verdict import SAMPLE_FLOOR, monotone_capacity

HOURS_PER_MONTH = 730.0


def _level(step: dict[str, Any]) -> float:
    return step.get("level", step["users"])


def _point(step: dict[str, Any]) -> dict[str, Any]:
    return {"users": step["users"], "arrival_rate": step.get("arrival_rate"), "level": _level(step),
            "start_time": step["start_time"], "rps": step["rps"], "output_tps": step["output_tps"],
            "total_tps": step["total_tps"], "goodput_rps": step["goodput_rps"]}


def _broken(step: dict[str, Any]) -> list[str]:
    return [k for k, v in step["slo"].items() if not v["met"]]


def find_capacity(steps: list[dict[str, Any]], has_slos: bool, sample_floor: int = SAMPLE_FLOOR) -> dict[str, Any]:
    """Steps in any order; each has ``level`` (users, or arrival rate for open-loop runs);
    ``sample_floor``: the ok requests a step needed for a verdict (what a thin step lacked)."""
    ordered = sorted(steps, key=lambda s: (_level(s), s["start_time"]))
    # A thin step has no verdict; a step the GPUs were throttled in measured another GPU
    # (llmload.report.sections.gpu): neither is judged, and neither can be capacity.
    judged = [s for s in ordered if not s.get("thin") and not s.get("never_capacity")]
    thin = [s for s in ordered if s.get("thin")]
    skipped = [{"level": _level(s), "users": s["users"], "why": s["never_capacity"]}
               for s in ordered if s.get("never_capacity") and not s.get("thin")]
    if not judged:
        why = "no measured step" if not ordered else "no step had enough ok requests for a verdict"
        return {"users": None, "rps": None, "output_tps": None, "limited_by": why,
                "thin_above": [_thin(s) for s in thin], **({"never_capacity": skipped} if skipped else {})}
    if not has_slos:
        best = max(judged, key=lambda s: s["rps"])
        return {**_point(best), "limited_by": "no SLO given: the step with the highest throughput",
                **({"never_capacity": skipped} if skipped else {})}
    levels = sorted({_level(s) for s in judged})
    passing = {lv: all(s["slo_met"] for s in judged if _level(s) == lv) for lv in levels}
    first_fail = next((lv for lv in levels if not passing[lv]), None)
    best = monotone_capacity((_level(s), bool(s["slo_met"])) for s in judged)  # the search's rule too
    above = [lv for lv in levels if passing[lv] and first_fail is not None and lv > first_fail]
    failing = next((s for s in judged if _level(s) == first_fail and not s["slo_met"]), None)
    if best is None:
        assert failing is not None
        out = {"users": None, "rps": None, "output_tps": None, "next_step_users": failing["users"],
               "next_step_level": first_fail,
               "limited_by": ", ".join(_broken(failing)) + f" ({_first_broken(failing, thin, sample_floor)})"}
    else:
        cap = [s for s in judged if _level(s) == best][-1]
        out = _point(cap)
        if failing is None:
            out["limited_by"] = "highest step tested (no step above it broke an SLO)"
        else:
            broken = _broken(failing)
            out["limited_by"] = ", ".join(broken) or "unknown"
            out["next_step_users"] = failing["users"]
            out["next_step_level"] = first_fail
            est = interpolate(cap, failing, broken)
            if est is not None:
                out["interpolated_rps"] = round(est, 4)
        out["borderline"] = [f"{k} at {_level(s):g}" for s in (cap, failing) if s is not None
                             for k, v in s["slo"].items() if v.get("borderline")]
    cap_level = out.get("level")
    out["non_monotone"] = above
    out["thin_above"] = [_thin(s) for s in thin if cap_level is None or _level(s) > cap_level]
    if skipped:
        out["never_capacity"] = skipped
    return out


def _at(step: dict[str, Any]) -> str:
    """``the 8-user step`` (or ``the 4-req/s step`` of an open-loop run)."""
    rate = step.get("arrival_rate")
    return f"the {_level(step):g}-req/s step" if rate is not None else f"the {step['users']}-user step"


def _first_broken(failing: dict[str, Any], thin: list[dict[str, Any]], floor: int) -> str:
    """Why no step is capacity when the lowest judged one broke: it was the lowest step, or the
    steps below it had too few requests for a verdict (each named, with what it had and needed)."""
    below = [s for s in thin if _level(s) < _level(failing)]
    if not below:
        at = f"{_level(failing):g} req/s" if failing.get("arrival_rate") is not None else f"{failing['users']} users"
        return f"broken already at the lowest step, {at}"
    had = []
    for s in below:
        note = str(s.get("note") or "").removesuffix(": no verdict, never capacity")
        had.append(f"{_at(s)} had {s['ok']} ok requests, {floor} needed" if s["ok"] < floor or not note
                   else f"{_at(s)} had {note}")
    return (f"broken at {_at(failing)}; below it too few requests for a verdict: " + "; ".join(had)
            + ": rerun with longer steps")


def _thin(step: dict[str, Any]) -> dict[str, Any]:
    return {"level": _level(step), "users": step["users"], "ok": step["ok"]}


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
            input_tps: float | None = None, output_cost_weight: float | None = None,
            rtfx: float | None = None) -> dict[str, Any]:
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
    if rtfx is not None:  # transcription: an hour of audio takes 1 / RTFx hours of the replica
        out[AUDIO_HOUR_PRICE] = round(usd_per_hour / rtfx, 8) if rtfx > 0 else None
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
