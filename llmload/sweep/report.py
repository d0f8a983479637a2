"""The sweep report: DIR/sweep.json (the documented schema), sweep.md and sweep.html (the frontier
charts inline, as the run report's).

sweep.json::

    {"plan": PATH, "slos": [...], "target_rps": X | null, "target_users": X | null, "headroom": 0.3,
     "cells": [{"id", "deployment", "workload", "repeat", "status", "error", "capacity", "cost", "plan",
                "gpu", "steps", "prefix", ...}],
     "frontier": {WORKLOAD: [{"deployment", "load", "tok_s_per_gpu", "tok_s_per_user", "ttft_p95_ms",
                              "usd_per_1m_output_tokens", "usd_per_good_request", "slo_met", "pareto"}]},
     "best": {WORKLOAD: {"deployment", "replicas", "gpus", "usd_per_month", "runner_up", "margin_is_real"}}}

Usage::

    summary = sweep_summary(plan, cells)
    write_sweep_report(summary, "out/")        # out/sweep.json, sweep.md, sweep.html
"""

from __future__ import annotations

import json
from typing import Any

from llmload.report.document import Block, clean, render_html, render_markdown, write_files
from llmload.report.format import fmt, fmt_usd
from llmload.sweep.frontier import TTFT_P95, best_deployments, frontier_points
from llmload.sweep.plan import Plan


def sweep_summary(plan: Plan, cells: list[dict[str, Any]]) -> dict[str, Any]:
    return {"plan": plan.path, "slos": [s.text() for s in plan.slos], "target_rps": plan.target_rps,
            "target_users": plan.target_users, "headroom": plan.headroom, "repeats": plan.repeats,
            "load": {"steps": list(plan.load.steps), "step_seconds": plan.load.step_seconds,
                     "warmup_s": plan.load.warmup_s, "step_precision": plan.load.step_precision or None},
            "cells": cells, "frontier": frontier_points(cells),
            "best": best_deployments(cells, plan.target_rps, plan.target_users, plan.headroom)}


def _target(s: dict[str, Any]) -> str:
    if s["target_rps"] is not None:
        return f"{s['target_rps']:g} req/s"
    if s["target_users"] is not None:
        return f"{s['target_users']:g} users"
    return "none (one replica each, ranked by $ per 1M output tokens)"


def _margin(real: bool | None) -> str:
    return {True: "yes (repeats' intervals do not overlap)", False: "no (within noise of the repeats)",
            None: "unknown (one repeat, or no runner-up)"}[real]


def _precision_text(s: dict[str, Any]) -> str:
    """With step_precision: how many of the cells' steps ended early (each cell's report says why)."""
    pct = s["load"].get("step_precision")
    if not pct:
        return ""
    steps = [st for c in s["cells"] if c["status"] == "done" for st in c.get("steps") or []]
    early = sum(1 for st in steps if st.get("ended") == "precise")
    return (f" Precision stop at {pct:g} %: {early} of {len(steps)} steps ended early (their SLO percentiles' 95 % "
            "intervals were that close); the rest ran to the step seconds, their cap.")


def sweep_blocks(s: dict[str, Any]) -> list[Block]:
    done = [c for c in s["cells"] if c["status"] == "done"]
    out = [Block("llmload sweep", 1, text=[
        f"Plan `{s['plan']}`: {len(s['cells'])} cells, {len(done)} finished. SLOs: {', '.join(s['slos']) or 'none'}; "
        f"target {_target(s)}; headroom {s['headroom']:g}; steps {','.join(map(str, s['load']['steps']))} users of "
        f"{s['load']['step_seconds']:g} s (warm-up {s['load']['warmup_s']:g} s)." + _precision_text(s)])]
    rows = []
    for w, b in s["best"].items():
        ru = b.get("runner_up") or {}
        rows.append([w, b["deployment"] or "none", fmt(b["replicas"]), fmt(b["gpus"]), fmt_usd(b["usd_per_month"]),
                     fmt_usd(b.get("usd_per_1m_output_tokens")), ru.get("deployment") or "–",
                     fmt_usd(ru.get("usd_per_month")), _margin(b["margin_is_real"])])
    out.append(Block("The answer: cheapest deployment meeting every SLO at the target", 2,
                     header=["workload", "deployment", "replicas", "GPUs", "$/month", "$ per 1M output tok",
                             "runner-up", "runner-up $/month", "margin larger than noise"], rows=rows))
    for w, points in s["frontier"].items():
        front = sorted((p for p in points if p["pareto"]), key=lambda p: -p["tok_s_per_gpu"])
        out.append(Block(f"Pareto frontier: {w}", 2, text=[
            "Output tok/s per GPU against output tok/s per user; every measured step is a point, these are the "
            "ones no other point beats on both."],
            header=["deployment", "users", "tok/s per GPU", "tok/s per user", "TTFT p95 (ms)", "SLOs met",
                    "$ per 1M output tok", "$ per good request"],
            rows=[[p["deployment"], f"{p['load']:g}", fmt(p["tok_s_per_gpu"], 1), fmt(p["tok_s_per_user"], 1),
                   fmt(p[TTFT_P95], 1), {True: "yes", False: "no", None: "–"}[p["slo_met"]],
                   fmt_usd(p["usd_per_1m_output_tokens"]), fmt_usd(p["usd_per_good_request"])] for p in front]))
        out.append(Block("", 3, chart=f"frontier:{w}"))
    # "gpu": the GPUs at capacity (llmload.report.sections.gpu.gpu_columns), for deployments with gpu_metrics:
    out.append(Block("Cells", 2, header=["cell", "deployment", "workload", "repeat", "status", "capacity",
                                         "limited by", "$ per 1M output tok", "GPU J per output token",
                                         "GPU bound by", "seconds"],
                     rows=[[c["id"], c["deployment"], c["workload"], str(c["repeat"]), c["status"],
                            fmt((c.get("capacity") or {}).get("level")),
                            str((c.get("capacity") or {}).get("limited_by") or "–"),
                            fmt_usd((c.get("cost") or {}).get("usd_per_million_output_tokens")),
                            fmt((c.get("gpu") or {}).get("j_per_output_token"), 4),
                            str((c.get("gpu") or {}).get("gpu_bound_by") or "–"), fmt(c.get("seconds"), 0)]
                           for c in s["cells"]]))
    errors = [f"- {c['id']}: " + c["error"].splitlines()[0] for c in s["cells"] if c.get("error")]
    if errors:
        out.append(Block("Failed cells", 2, text=[*errors, "- (each cell's cell.json has the whole message and "
                                                          "the server's log tail)"]))
    return out


def frontier_chart(points: list[dict[str, Any]], workload: str) -> bytes | None:
    if not points:
        return None
    from llmload.report.charts import _fig, _png

    plt = _fig()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.8))
    deployments = sorted({p["deployment"] for p in points})
    for i, dep in enumerate(deployments):
        mine = sorted((p for p in points if p["deployment"] == dep), key=lambda p: p["load"])
        color = f"C{i % 10}"
        axes[0].plot([p["tok_s_per_user"] for p in mine], [p["tok_s_per_gpu"] for p in mine], "o", color=color,
                     label=dep, alpha=0.7)
        axes[1].plot([p[TTFT_P95] for p in mine], [p["tok_s_per_gpu"] for p in mine], "o", color=color,
                     alpha=0.7)
    front = sorted((p for p in points if p["pareto"]), key=lambda p: p["tok_s_per_user"])
    axes[0].plot([p["tok_s_per_user"] for p in front], [p["tok_s_per_gpu"] for p in front], "k--", lw=1,
                 label="Pareto frontier")
    axes[0].set_xlabel("output tok/s per user")
    axes[1].set_xlabel("TTFT p95 (ms)")
    for ax in axes:
        ax.set_ylabel("output tok/s per GPU")
        ax.grid(alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.suptitle(f"{workload}: every step of every cell", fontsize=10)
    return _png(fig)


def write_sweep_report(summary: dict[str, Any], out_dir: str) -> list[str]:
    charts = {f"frontier:{w}": frontier_chart(p, w) for w, p in summary["frontier"].items()}
    bl = sweep_blocks(summary)
    return write_files(out_dir, {
        "sweep.json": json.dumps(clean(summary), indent=2, default=str),
        "sweep.md": render_markdown(bl, charts, "sweep.html"),
        "sweep.html": render_html(bl, charts, "llmload sweep"),
    })


def summary_text(summary: dict[str, Any]) -> str:
    lines = []
    for w, b in summary["best"].items():
        ru = (b.get("runner_up") or {}).get("deployment") or "none"
        lines.append(f"{w}: {b['deployment'] or 'no deployment meets the SLOs'}"
                     + (f", {b['replicas']} replica(s), {b['gpus']} GPU(s), {fmt_usd(b['usd_per_month'])}/month"
                        if b["deployment"] else "") + f"; runner-up {ru}; margin real: {b['margin_is_real']}")
    return "\n".join(lines)
