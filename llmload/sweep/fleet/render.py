"""sweep.md's fleet sections, from sweep.json's ``fleets`` (:mod:`llmload.sweep.fleet.summary`).
Pure: dicts in, report blocks out.

Usage::

    blocks = fleet_blocks(summary["fleets"])
"""

from __future__ import annotations

from typing import Any

from llmload.report.document import Block
from llmload.report.format import fmt, fmt_pct, fmt_usd


def _ci(ci: list[float | None] | None, nd: int = 2) -> str:
    lo, hi = ci or [None, None]
    return f"[{fmt(lo, nd)}, {fmt(hi, nd)}]"


def _per_replica(d: dict[str, Any] | None, nd: int = 3, pct: bool = False) -> str:
    if not d:
        return "–"
    return " / ".join(f"{k}: {fmt_pct(v) if pct else fmt(v, nd)}" for k, v in sorted(d.items()))


def fleet_blocks(fleets: dict[str, dict[str, Any]]) -> list[Block]:
    out = []
    for workload, bases in fleets.items():
        for base, f in bases.items():
            one = f["one_replica"] or {}
            rows, plan_rows = [], []
            if one:
                rows.append(["1", ONE_LABEL, fmt(one["capacity_rps"], 2), _ci(one["capacity_interval"]), "1.00", "–",
                             "–", "–", "–", fmt(one.get("fleet_hit_rate"), 3), "–"])
            for policy, v in f["policies"].items():
                for k, e in sorted(v["k"].items(), key=lambda x: int(x[0])):
                    rows.append([k, policy, fmt(e.get("capacity_rps"), 2), _ci(e.get("capacity_interval")),
                                 fmt(e["eta"], 3), _ci(e["eta_interval"], 3), fmt(e.get("imbalance"), 2),
                                 _per_replica(e.get("share")), _per_replica(e.get("waiting_mean"), 2),
                                 fmt(e.get("fleet_hit_rate"), 3), _per_replica(e.get("hit_rate"))])
                    plan_rows.append([policy, k, fmt(e.get("capacity_per_replica"), 3), fmt(e.get("replicas")),
                                      fmt(e.get("gpus")), fmt_usd(e.get("usd_per_month")),
                                      fmt_usd(e.get("usd_per_1m_output_tokens")),
                                      "yes" if (v["plan"] or {}).get("k_used") == int(k) else ""])
            linear = f["linear_plan"] or {}
            if linear:
                plan_rows.append(["K × one", "1", fmt(linear.get("capacity_per_replica"), 3),
                                  fmt(linear.get("replicas")), fmt(linear.get("gpus")),
                                  fmt_usd(linear.get("usd_per_month")), fmt_usd(linear.get("usd_per_1m_output_tokens")),
                                  "(the arithmetic plan)"])
            out.append(Block(f"Fleet: {base} behind {f['router']}, {workload}", 2, text=[
                "η(K) = capacity(K) ÷ (K × capacity(1)), capacities in req/s at each cell's capacity step, the "
                "interval from the steps' own req/s intervals. Shares, queue and imbalance (max ÷ mean) at the "
                "capacity step, from each replica's own /metrics; hit rates over the measured steps.",
                *[f"- {v}" for v in f["verdicts"]]],
                header=["K", "policy", "capacity req/s", "interval", "η", "η interval", "imbalance",
                        "share per replica", "queue mean per replica", "fleet hit rate", "hit rate per replica"],
                rows=rows))
            out.append(Block(f"The plan from measured η: {base}, {workload}", 3, text=[
                f"Replicas for the target ({fmt(f['target'])} {f['unit']}) if each holds what one of that fleet held; "
                "a policy's answer is the row of the largest measured K not above the replicas it needs."],
                header=["policy", "measured K", f"{f['unit']} per replica", "replicas", "GPUs", "$/month",
                        "$ per 1M output tok", "the policy's answer"], rows=plan_rows))
    return out


ONE_LABEL = "one replica"
