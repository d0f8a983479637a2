"""Each replica of a fleet on its own, from ``PREFIX_server_metrics.csv`` when the run read several
endpoints (``--server-metrics`` once per replica behind a router). Reads the file and adds keys;
the one thing it changes is which steps may be capacity (a step the fleet lost a member in is not).

Per step, over its measured window, per endpoint (:func:`replica_window`): requests it finished
(the engine's ``requests_finished`` counter: vLLM's ``request_success``, SGLang's ``num_requests``,
TGI's ``tgi_request_success``), output tokens it generated, waiting and running requests and KV
use (mean, max), its prefix-cache hit rate (hit ÷ queried tokens), and its share of the step's
work: of the requests when every endpoint counts them, else of the output tokens
(``share_by``); the **imbalance** is max ÷ mean of that work over the endpoints that answered
(1.0: even). Over the measured steps together, the same per endpoint (``over_steps``).

**A lost member**: an endpoint that answered its ``/metrics`` and then failed every scrape to the
end of the run, at least twice. ``lost`` names it, when it last answered and when it stopped,
and counts the run's failed requests (not cancelled) that ended after it last answered. Every
step whose window ends after that moment measured a smaller fleet for part of it:
:func:`flag_lost_members` marks it (``fleet_lost``, its verdict says "fleet lost a member") and it
is never capacity (``never_capacity``), as a throttled GPU's step is not.

Usage::

    run = load_replicas("runs/x")          # None unless the file has two endpoints or more
    flag_lost_members(steps, run)          # before the capacity is found
    report.replicas = replicas_json(report, run)
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llmload import files
from llmload.report.sections.metrics_csv import read_metrics_csv
from llmload.report.steps import Step
from llmload.server_metrics import ServerSnapshot, aggregate_step
from llmload.server_metrics.known import COMMON
from llmload.server_metrics.series import UP, snapshot_from_rows
from llmload.server_metrics.window import counter_increase

REQUESTS, OUTPUT = "requests_finished", "generation_tokens"
LOST_AFTER_FAILURES = 2  # failed scrapes in a row, to the end of the run, before a member counts as lost


@dataclass
class ReplicaRun:
    endpoints: list[str]
    points: dict[str, list[tuple[float, ServerSnapshot]]]  # each endpoint's answered scrapes
    up: dict[str, list[tuple[float, bool]]]
    lost: list[dict[str, Any]] = field(default_factory=list)


def load_replicas(prefix: str | list[str]) -> ReplicaRun | None:
    """Each endpoint's scrapes apart; None without the file or with one endpoint (not a fleet)."""
    prefixes = [prefix] if isinstance(prefix, str) else prefix
    path, df, _ = read_metrics_csv([files.path(files.prefix_of(p), files.SERVER_METRICS) for p in prefixes],
                                   "server metrics")
    if df is None or path is None:
        return None
    df = df[df["metric"].isin(set(COMMON) | {UP}) & df["time"].notna()]
    if df["endpoint"].nunique() < 2:
        return None
    points: dict[str, list[tuple[float, ServerSnapshot]]] = defaultdict(list)
    up: dict[str, list[tuple[float, bool]]] = defaultdict(list)
    for (endpoint, t), rows in df.groupby(["endpoint", "time"], sort=True):
        answered = bool((rows.loc[rows["metric"] == UP, "value"] == 1).any())
        up[endpoint].append((float(t), answered))
        if answered:
            rest = rows[rows["metric"] != UP]
            points[endpoint].append((float(t), snapshot_from_rows(
                rest[["metric", "labels", "value"]].itertuples(index=False, name=None))))
    run = ReplicaRun(sorted(up), dict(points), dict(up))
    run.lost = lost_members(run.up)
    return run


def lost_members(up: dict[str, list[tuple[float, bool]]]) -> list[dict[str, Any]]:
    """Endpoints that answered, then failed every scrape to the end (at least LOST_AFTER_FAILURES)."""
    out = []
    for endpoint, series in sorted(up.items()):
        answered = [t for t, ok in series if ok]
        if not answered:
            continue
        after = [t for t, ok in series if t > answered[-1]]
        if len(after) >= LOST_AFTER_FAILURES:
            out.append({"endpoint": endpoint, "last_answered": answered[-1], "down_since": after[0]})
    return out


def flag_lost_members(steps: list[Step], run: ReplicaRun | None) -> None:
    """Mark each step whose window ends after a member last answered: never capacity, and its
    verdict says the fleet lost a member."""
    if run is None or not run.lost:
        return
    for s in steps:
        gone = [m for m in run.lost if s.end > m["last_answered"]]
        if not gone:
            continue
        names = ", ".join(f"{m['endpoint']} (stopped answering at {m['down_since']:.1f})" for m in gone)
        s.data["fleet_lost"] = [m["endpoint"] for m in gone]
        s.data["never_capacity"] = f"the fleet lost a member: {names}"
        s.data["verdict"] = f"{s.data['verdict']}; fleet lost a member"
        s.data["note"] = "; ".join(filter(None, (s.data.get("note"), f"fleet lost a member: {names}: never capacity")))


def _counter(pts: list[tuple[float, ServerSnapshot]], name: str, t0: float, t1: float) -> float | None:
    return counter_increase([(t, s.counters[name]) for t, s in pts if name in s.counters], t0, t1)


def _r(v: float | None, nd: int = 4) -> float | None:
    return None if v is None else round(float(v), nd)


def replica_window(run: ReplicaRun, t0: float, t1: float) -> dict[str, Any]:
    """Every endpoint's numbers over ``[t0, t1]``, its share of the work and the imbalance."""
    per: dict[str, dict[str, Any]] = {}
    for e in run.endpoints:
        pts = run.points.get(e, [])
        st = aggregate_step(pts, t0, t1)
        hits = _counter(pts, "prefix_cache_hits_tokens", t0, t1)
        queries = _counter(pts, "prefix_cache_queries_tokens", t0, t1)
        per[e] = {"requests": _r(_counter(pts, REQUESTS, t0, t1), 1), "output_tokens": _r(_counter(pts, OUTPUT, t0, t1),
                                                                                           1),
                  "waiting": {"mean": _r(st.waiting_mean, 3), "max": st.waiting_max},
                  "running": {"mean": _r(st.running_mean, 3), "max": st.running_max},
                  "kv_usage": {"mean": _r(st.kv_usage_mean), "max": _r(st.kv_usage_max)},
                  "prefix_cache_hit_rate": _r(st.prefix_cache_hit_rate),
                  "prefix_cache_hits_tokens": _r(hits, 1), "prefix_cache_queries_tokens": _r(queries, 1),
                  "scrapes": st.scrapes,
                  "failed_scrapes": sum(1 for t, ok in run.up.get(e, []) if t0 <= t <= t1 and not ok)}
    return {"replicas": per, **shares(per)}


def shares(per: dict[str, dict[str, Any]]) -> dict[str, Any]:
    """Each endpoint's share of the work (requests when all count them, else output tokens) and
    max ÷ mean over the endpoints that have a number."""
    answered = [p for p in per.values() if p["requests"] is not None or p["output_tokens"] is not None]
    by = "requests" if answered and all(p["requests"] is not None for p in answered) else "output_tokens"
    work = {e: p[by] for e, p in per.items() if p[by] is not None}
    total = sum(work.values())
    for e, p in per.items():
        p["share"] = _r(work[e] / total) if e in work and total > 0 else None
    mean = total / len(work) if work else 0.0
    return {"share_by": by, "imbalance": _r(max(work.values()) / mean, 3) if mean > 0 else None}


def _add(acc: dict[str, Any], one: dict[str, Any], key: str) -> None:
    if one[key] is not None:
        acc[key] = (acc.get(key) or 0.0) + one[key]


def over_steps(windows: list[dict[str, Any]]) -> dict[str, Any]:
    """The measured steps together: work and prefix-cache tokens summed, queue and KV means averaged."""
    per: dict[str, dict[str, Any]] = defaultdict(lambda: {"requests": None, "output_tokens": None})
    means: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    for w in windows:
        for e, p in w["replicas"].items():
            acc = per[e]
            for key in ("requests", "output_tokens", "prefix_cache_hits_tokens", "prefix_cache_queries_tokens"):
                acc.setdefault(key, None)
                _add(acc, p, key)
            for key in ("waiting", "running", "kv_usage"):
                if p[key]["mean"] is not None:
                    means[e][key].append(p[key]["mean"])
    out = {}
    for e, acc in per.items():
        q = acc.get("prefix_cache_queries_tokens")
        acc["prefix_cache_hit_rate"] = _r(acc["prefix_cache_hits_tokens"] / q) if q else None
        for key in ("waiting", "running", "kv_usage"):
            acc[f"{key}_mean"] = _r(float(np.mean(means[e][key])), 4) if means[e][key] else None
        out[e] = acc
    return {"replicas": out, **shares(out)}


def _failed_after(df: Any, t: float) -> int:
    mask = (~df["ok"].to_numpy(dtype=bool)) & (df["status"].astype(str).to_numpy() != "cancelled") & \
        (df["end_time"].to_numpy(dtype=float) >= t)
    return int(mask.sum())


def replicas_json(steps: list[Step], run: ReplicaRun | None, df: Any) -> dict[str, Any] | None:
    """report.json's ``replicas`` (see the module docstring); None when the run is not a fleet."""
    if run is None:
        return None
    windows = []
    for s in steps:
        w = replica_window(run, s.measured_from, s.end)
        windows.append({"level": s.data["level"], "users": s.data["users"], "lost": s.data.get("fleet_lost", []),
                        **w})
    lost = [{**m, "failed_requests": _failed_after(df, m["last_answered"]),
             "steps": [s.data["level"] for s in steps if s.end > m["last_answered"]]} for m in run.lost]
    return {"endpoints": run.endpoints, "steps": windows, "over_steps": over_steps(windows), "lost": lost}


def replicas_table(report: Any) -> tuple[str, list[str], list[str], list[list[str]]] | None:
    """The report's Replicas block: heading, text, header and rows (one per step and replica)."""
    from llmload.report.format import fmt, fmt_pct

    data = report.replicas
    if not data:
        return None
    header = [report.level_label, "replica", "requests", "output tokens", "share", "waiting mean/max",
              "running mean", "KV % mean/max", "prefix hit rate", "imbalance (max ÷ mean)"]
    rows = []
    for w in [*data["steps"], {"level": "all measured", **data["over_steps"]}]:
        for i, (e, p) in enumerate(w["replicas"].items()):
            waiting = p.get("waiting") or {"mean": p.get("waiting_mean"), "max": None}
            kv = p.get("kv_usage") or {"mean": p.get("kv_usage_mean"), "max": None}
            running = (p.get("running") or {}).get("mean", p.get("running_mean"))
            rows.append([(f"{w['level']:g}" if isinstance(w["level"], int | float) else w["level"]) if i == 0 else "",
                         e + (" (lost)" if e in w.get("lost", []) else ""), fmt(p["requests"], 0),
                         fmt(p["output_tokens"], 0), fmt(p.get("share"), 3),
                         f"{fmt(waiting['mean'], 2)} / {fmt(waiting['max'], 0)}", fmt(running, 2),
                         f"{fmt_pct(kv['mean'])} / {fmt_pct(kv['max'])}", fmt(p["prefix_cache_hit_rate"], 3),
                         fmt(w["imbalance"], 3) if i == 0 else ""])
    text = [f"Each replica from its own /metrics ({len(data['endpoints'])} endpoints): its share of the "
            f"{'requests it finished' if data['over_steps']['share_by'] == 'requests' else 'output tokens'} and the "
            "imbalance, max ÷ mean of that work (1.0: even)."]
    text += [f"The fleet lost a member: {m['endpoint']} last answered at {m['last_answered']:.1f}, failed from "
             f"{m['down_since']:.1f}; {m['failed_requests']} request(s) failed after it last answered; steps "
             f"{', '.join(f'{lv:g}' for lv in m['steps'])} are never capacity." for m in data["lost"]]
    return "Replicas", text, header, rows
