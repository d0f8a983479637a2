"""What a sweep's fleets say, as arithmetic on their cells. Pure.

For each workload and fleet deployment (with its params), from the cell of one replica and the
cells of K replicas under each policy:

* **Scaling efficiency** η(K) = capacity(K) ÷ (K × capacity(1)), capacities in req/s at each cell's
  capacity step. Its interval is the ratio of the steps' own req/s intervals taken at opposite
  ends (``rps_ci95``, batch means: :func:`llmload.report.steps.rate_ci`):
  [low(K) ÷ (K × high(1)), high(K) ÷ (K × low(1))]: wider than a 95 % interval, never narrower.
* **Per-replica share and imbalance** at the capacity step (else the highest measured step):
  each replica's share of the requests it finished (of the output tokens for an engine without a
  request counter), its mean queue and KV use, and max ÷ mean of the work (1.0: even).
* **Prefix-cache locality**: per replica, the hit rate (hit ÷ queried tokens, from its own
  counters) over the measured steps; for the fleet, the mean over its measured steps of the
  fleet's hit rate (every replica's counters added up), against the one replica's on the same
  workload (``vs_one_replica``: the fleet's minus the single replica's).
* **The plan from measured η**: for each measured K the replicas the target needs if every
  replica holds what one of that fleet held, ``⌈target ÷ (capacity(K) ÷ K × (1 − headroom))⌉``
  (capacity in req/s for ``target_rps``, users for ``target_users``), and the policy's answer:
  the row of the largest measured K not above the replicas it says (the measured fleet closest
  to the one planned without being bigger; ``extrapolated`` when the answer is beyond every
  measured K), with $/month (replicas × GPUs per replica × price × 730) and $ per 1M output
  tokens at that K's capacity. ``linear_plan`` is what K × one would have said. The
  **cheapest policy** is the one whose answer costs least (ties: the lower $ per 1M tokens);
  a policy with no capacity at any K does not meet the SLOs and is left out.

Usage::

    fleets = fleet_summary(cells, target_rps=40, target_users=None, headroom=0.3)
    fleets["rag"]["mock"]["policies"]["affinity"]["k"]["2"]["eta"]     # 1.3
    fleet_options(fleets)      # the policies' answers, as the sweep's best-deployment options
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from typing import Any

HOURS_PER_MONTH = 730.0
ONE = "one replica"


def _r(v: float | None, nd: int = 4) -> float | None:
    return None if v is None else round(v, nd)


def capacity_step(cell: dict[str, Any]) -> dict[str, Any] | None:
    """The step the cell's capacity comes from, else its highest measured step."""
    steps = [s for s in cell.get("steps") or [] if not s.get("thin")]
    cap = cell.get("capacity") or {}
    at = [s for s in steps if s["level"] == cap.get("level") and s["rps"] == cap.get("rps")]
    if at:
        return at[-1]
    return max(steps, key=lambda s: s["level"]) if steps else None


def _index(cell: dict[str, Any]) -> dict[str, str]:
    """Metrics URL → the replica's index, as a string (JSON keys)."""
    return {r["metrics_url"]: str(r["index"]) for r in (cell.get("fleet") or {}).get("replicas", [])}


def replica_view(cell: dict[str, Any]) -> dict[str, Any]:
    """Shares, queue, KV and imbalance at the capacity step; hit rates over the measured steps."""
    names = _index(cell)
    step = capacity_step(cell) or {}
    per = step.get("replicas") or {}
    over = (cell.get("replica_metrics") or {}).get("over_steps") or {"replicas": {}}
    hits = {names.get(e, e): p.get("prefix_cache_hit_rate") for e, p in over["replicas"].items()}
    rates = [s["prefix_cache_hit_rate"] for s in cell.get("steps") or []
             if not s.get("thin") and s.get("prefix_cache_hit_rate") is not None]
    lost = (cell.get("replica_metrics") or {}).get("lost") or []
    return {
        "at_users": step.get("users"), "share_by": step.get("share_by"), "imbalance": step.get("imbalance"),
        "share": {names.get(e, e): p.get("share") for e, p in per.items()},
        "requests": {names.get(e, e): p.get("requests") for e, p in per.items()},
        "waiting_mean": {names.get(e, e): (p.get("waiting") or {}).get("mean") for e, p in per.items()},
        "kv_usage_mean": {names.get(e, e): (p.get("kv_usage") or {}).get("mean") for e, p in per.items()},
        "hit_rate": hits,
        "fleet_hit_rate": _r(statistics.mean(rates)) if rates else None,  # the steps' server-side hit rates
        "cached_share": (cell.get("prefix_cache") or {}).get("hit_ratio_tokens"),
        "lost": [{"replica": names.get(m["endpoint"], m["endpoint"]), "endpoint": m["endpoint"],
                  "failed_requests": m["failed_requests"], "steps": m["steps"]} for m in lost],
    }


def _capacity(cells: list[dict[str, Any]]) -> dict[str, Any] | None:
    """Median capacity over the repeats, with the widest interval of their capacity steps."""
    caps = []
    for c in cells:
        cap = c.get("capacity") or {}
        step = capacity_step(c) if cap.get("rps") else None
        if step is None:
            continue
        lo, hi = step.get("rps_ci95") or [None, None]
        caps.append((cap["rps"], cap.get("users"), cap.get("output_tps"), lo, hi, c))
    if not caps:
        return None
    mid = statistics.median(x[0] for x in caps)
    chosen = min(caps, key=lambda x: abs(x[0] - mid))
    lows, highs = [x[3] for x in caps], [x[4] for x in caps]
    return {"rps": round(mid, 4), "users": chosen[1], "output_tps": chosen[2], "cell": chosen[5]["id"],
            "rps_interval": [None if None in lows else min(lows), None if None in highs else max(highs)],
            "view": replica_view(chosen[5])}


def _eta(k: int, cap: dict[str, Any], one: dict[str, Any]) -> tuple[float, list[float | None]]:
    eta = cap["rps"] / (k * one["rps"])
    lo_k, hi_k = cap["rps_interval"]
    lo_1, hi_1 = one["rps_interval"]
    low = lo_k / (k * hi_1) if lo_k is not None and hi_1 else None
    high = hi_k / (k * lo_1) if hi_k is not None and lo_1 else None
    return round(eta, 4), [_r(low), _r(high)]


def _plan_row(k: int, cap: dict[str, Any], target: float | None, by_users: bool, headroom: float, gpus: int,
              price: float) -> dict[str, Any]:
    per_replica = (cap["users"] if by_users else cap["rps"]) / k
    need = None if target is None or not per_replica else max(1, math.ceil(target / (per_replica * (1 - headroom))
                                                                           - 1e-9))
    per_1m = price * gpus * k / (cap["output_tps"] * 3600.0) * 1e6 if cap.get("output_tps") else None
    return {"capacity_per_replica": _r(per_replica), "replicas": need, "gpus": None if need is None else need * gpus,
            "usd_per_month": None if need is None else round(need * gpus * price * HOURS_PER_MONTH, 2),
            "usd_per_1m_output_tokens": _r(per_1m, 6)}


def _answer(rows: dict[int, dict[str, Any]]) -> dict[str, Any] | None:
    """The row of the largest measured K not above the replicas it says (else the smallest K)."""
    if not rows:
        return None
    ks = sorted(rows)
    fits = [k for k in ks if rows[k]["replicas"] is not None and k <= rows[k]["replicas"]]
    k = fits[-1] if fits else ks[0]
    row = rows[k]
    return {"k_used": k, **row, "extrapolated": row["replicas"] is not None and row["replicas"] > ks[-1]}


def fleet_summary(cells: list[dict[str, Any]], target_rps: float | None, target_users: float | None,
                  headroom: float) -> dict[str, dict[str, Any]]:
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for c in cells:
        if c.get("status") == "done" and c.get("replicas"):
            groups[(c["workload"], c["base"])].append(c)
    by_users = target_users is not None
    target = target_users if by_users else target_rps
    out: dict[str, dict[str, Any]] = defaultdict(dict)
    for (workload, base), mine in groups.items():
        first = mine[0]
        gpus, price = first["gpus_per_replica"], first["gpu_hourly_usd"]
        one = _capacity([c for c in mine if c["replicas"] == 1])
        policies: dict[str, Any] = {}
        for policy in sorted({c["policy"] for c in mine if c["replicas"] > 1}):
            ks: dict[str, Any] = {}
            rows: dict[int, dict[str, Any]] = {}
            for k in sorted({c["replicas"] for c in mine if c["policy"] == policy}):
                cap = _capacity([c for c in mine if c["policy"] == policy and c["replicas"] == k])
                entry: dict[str, Any] = {"capacity_rps": None, "eta": None, "eta_interval": [None, None]}
                if cap is not None:
                    rows[k] = _plan_row(k, cap, target, by_users, headroom, gpus, price)
                    entry = {"cell": cap["cell"], "capacity_rps": cap["rps"], "capacity_interval": cap["rps_interval"],
                             "capacity_users": cap["users"], "eta": None, "eta_interval": [None, None], **rows[k],
                             **cap["view"]}
                    if one is not None:
                        entry["eta"], entry["eta_interval"] = _eta(k, cap, one)
                        mine_rate, base_rate = entry["fleet_hit_rate"], one["view"]["fleet_hit_rate"]
                        entry["vs_one_replica"] = _r(mine_rate - base_rate) if None not in (mine_rate, base_rate) \
                            else None
                ks[str(k)] = entry
            if one is not None:  # the one-replica row belongs to every policy's plan
                rows.setdefault(1, _plan_row(1, one, target, by_users, headroom, gpus, price))
            policies[policy] = {"k": ks, "plan": _answer(rows)}
        options = [(p, v["plan"]) for p, v in policies.items() if v["plan"] and v["plan"]["replicas"] is not None]
        key = (lambda o: (o[1]["usd_per_month"], o[1]["usd_per_1m_output_tokens"] or math.inf)) if target else \
            (lambda o: (o[1]["usd_per_1m_output_tokens"] or math.inf, o[0]))
        cheapest = min(options, key=key)[0] if options else None
        if not target and not options:
            options = [(p, v["plan"]) for p, v in policies.items() if v["plan"]]
            cheapest = min(options, key=key)[0] if options else None
        out[workload][base] = {
            "router": first.get("router"), "unit": "users" if by_users else "req/s", "target": target,
            "one_replica": None if one is None else {"cell": one["cell"], "capacity_rps": one["rps"],
                                                     "capacity_interval": one["rps_interval"], **one["view"]},
            "linear_plan": None if one is None else _plan_row(1, one, target, by_users, headroom, gpus, price),
            "policies": policies, "cheapest_policy": cheapest}
        out[workload][base]["verdicts"] = verdicts(out[workload][base])
    return dict(out)


def _with_interval(v: float | None, ci: list[float | None]) -> str:
    if v is None:
        return "none"
    lo, hi = ci
    return f"{v:.2f} [{'?' if lo is None else f'{lo:.2f}'}, {'?' if hi is None else f'{hi:.2f}'}]"


def verdicts(f: dict[str, Any]) -> list[str]:
    """The fleet's findings in words: which policy scales best at each K and whether that is more
    than noise, the cheapest policy against K × one, imbalance and lost members."""
    out = []
    ks = sorted({int(k) for p in f["policies"].values() for k in p["k"]})
    for k in ks:
        rated = [(p, v["k"][str(k)]) for p, v in f["policies"].items()
                 if str(k) in v["k"] and v["k"][str(k)]["eta"] is not None]
        if len(rated) < 2:
            continue
        rated.sort(key=lambda x: -x[1]["eta"])
        (best, b), (second, s) = rated[0], rated[1]
        real = b["eta_interval"][0] is not None and s["eta_interval"][1] is not None and \
            b["eta_interval"][0] > s["eta_interval"][1]
        out.append(f"×{k}: {best} has the highest η, {_with_interval(b['eta'], b['eta_interval'])}, against {second}'s "
                   f"{_with_interval(s['eta'], s['eta_interval'])}: "
                   + ("the intervals do not overlap, a real difference" if real else "the intervals overlap, "
                      "within noise"))
        for p, v in rated:
            if v.get("vs_one_replica") is not None and v.get("fleet_hit_rate") is not None:
                out.append(f"×{k} {p}: prefix-cache hit rate {v['fleet_hit_rate']:.3f}, "
                           f"{v['vs_one_replica']:+.3f} against one replica's")
    for p, v in f["policies"].items():
        for k, e in v["k"].items():
            if e.get("imbalance") is not None and e["imbalance"] >= 1.25:
                top = max(e["share"].items(), key=lambda x: x[1] or 0)
                out.append(f"×{k} {p}: imbalance {e['imbalance']:.2f} (max ÷ mean); replica {top[0]} did "
                           f"{(top[1] or 0) * 100:.0f} % of the work")
            for m in e.get("lost") or []:
                out.append(f"×{k} {p}: the fleet lost replica {m['replica']} ({m['endpoint']}): {m['failed_requests']} "
                           f"request(s) failed; steps {', '.join(map(str, m['steps']))} are never capacity")
    cheap = f["cheapest_policy"]
    if cheap:
        plan, linear = f["policies"][cheap]["plan"], f["linear_plan"] or {}
        if plan["replicas"] is not None:
            out.append(f"cheapest policy meeting the SLOs at {f['target']:g} {f['unit']}: {cheap}, {plan['replicas']} "
                       f"replicas (η measured at ×{plan['k_used']}"
                       + (", extrapolated beyond it" if plan["extrapolated"] else "")
                       + f"), ${plan['usd_per_month']:,.2f}/month; K × one would say {linear.get('replicas')}")
        else:
            out.append(f"cheapest policy per 1M output tokens: {cheap}")
    return out


def fleet_options(fleets: dict[str, dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    """Each fleet policy's answer as an option of the sweep's best-deployment ranking."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for workload, bases in fleets.items():
        for base, f in bases.items():
            for policy, v in f["policies"].items():
                plan = v["plan"]
                if not plan:
                    continue
                cost = plan["usd_per_month"] if f["target"] is not None else plan["usd_per_1m_output_tokens"]
                if cost is None:
                    continue
                out[workload].append({"deployment": f"{base} behind {f['router']} ({policy})", "cost": cost,
                                      "low": cost, "high": cost, "repeats": 1, "replicas": plan["replicas"] or 1,
                                      "gpus": plan["gpus"], "usd_per_month": plan["usd_per_month"],
                                      "usd_per_1m_output_tokens": plan["usd_per_1m_output_tokens"],
                                      "capacity": plan["capacity_per_replica"]})
    return dict(out)
