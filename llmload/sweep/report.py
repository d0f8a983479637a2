"""The sweep report: DIR/sweep.json (the documented schema), sweep.md and sweep.html (the frontier
charts inline, drawn as the run report's: :mod:`llmload.report.chart_parts`).

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
from llmload.report.format import capacity_text, fmt, fmt_usd, money
from llmload.sweep.fleet.render import fleet_blocks
from llmload.sweep.fleet.summary import fleet_options, fleet_summary
from llmload.sweep.frontier import TTFT_P95, best_deployments, frontier_points
from llmload.sweep.plan import Plan


def sweep_summary(plan: Plan, cells: list[dict[str, Any]]) -> dict[str, Any]:
    fleets = fleet_summary(cells, plan.target_rps, plan.target_users, plan.headroom)
    return {"plan": plan.path, "slos": [s.text() for s in plan.slos], "target_rps": plan.target_rps,
            "target_users": plan.target_users, "headroom": plan.headroom, "repeats": plan.repeats,
            "load": {"steps": list(plan.load.steps), "step_seconds": plan.load.step_seconds,
                     "warmup_s": plan.load.warmup_s, "step_precision": plan.load.step_precision or None},
            "cells": cells, "frontier": frontier_points(cells), "fleets": fleets,
            "best": best_deployments(cells, plan.target_rps, plan.target_users, plan.headroom, fleet_options(fleets))}


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
        out.append(Block("", 3, chart=f"frontier:{w}", caption=FRONTIER_CAPTION))
    out += fleet_blocks(s.get("fleets") or {})  # K replicas behind a router: η, shares, locality, the plan
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


FRONTIER_CAPTION = (
    "One point is one measured step of one cell, labelled with its users: up, its output tok/s per GPU; across, its "
    "output tok/s per user (left) and its TTFT p95 (right). A deployment's steps are joined in load order, each "
    "deployment its colour and mark. Filled: every SLO met; pale in a red ring: an SLO broken; hollow: no SLO to "
    "judge. A step with too few requests for a verdict is left out (the cells' table says which). The dashed line "
    "is the Pareto frontier. Axes start at zero.")
MARKS = "osD^vPX*"


def frontier_chart(points: list[dict[str, Any]], workload: str) -> str | None:
    """Both panels of a workload's frontier as the report's charts are drawn (inline SVG, the page's
    width, the legend under the panels, never over a point; value axes from zero)."""
    if not points:
        return None
    from matplotlib.colors import to_rgba
    from matplotlib.lines import Line2D

    from llmload.report.chart_parts import WIDE, figure_legend, figure_lib, laid_out, name_axes, place_labels, svg_of
    from llmload.report.charts import SLO_COLOR, _from_zero

    plt = figure_lib()
    fig, axes = plt.subplots(1, 2, figsize=WIDE, layout="constrained")
    deployments = sorted({p["deployment"] for p in points})
    labels: list[list[tuple]] = [[], []]
    for i, dep in enumerate(deployments):
        mine = sorted((p for p in points if p["deployment"] == dep), key=lambda p: p["load"])
        color, mark = f"C{i % 10}", MARKS[i % len(MARKS)]
        size = max(5.0, 9.0 - 1.5 * i)  # later ones smaller: a point on another's stays visible inside it
        for j, (ax, across) in enumerate(((axes[0], "tok_s_per_user"), (axes[1], TTFT_P95))):
            pts = [p for p in mine if p.get(across) is not None]
            ax.plot([p[across] for p in pts], [p["tok_s_per_gpu"] for p in pts], "-", color=color, lw=1, alpha=0.45)
            for p in pts:
                met = p["slo_met"]
                ax.plot([p[across]], [p["tok_s_per_gpu"]], ls="none", marker=mark, ms=size, zorder=3,
                        mfc=color if met else to_rgba(color, 0.3) if met is False else "white",
                        mec=SLO_COLOR if met is False else color, mew=2.2 if met is False else 1.2)
                labels[j].append((p[across], p["tok_s_per_gpu"], f"{p['load']:g}", bool(p["pareto"]), color))
        axes[0].plot([], [], ls="-", marker=mark, ms=7, color=color, label=dep)
    front = sorted((p for p in points if p["pareto"]), key=lambda p: p["tok_s_per_user"])
    axes[0].plot([p["tok_s_per_user"] for p in front], [p["tok_s_per_gpu"] for p in front], "k--", lw=1,
                 label="Pareto frontier", zorder=2)
    axes[0].set_xlabel("output tok/s per user")
    axes[1].set_xlabel("TTFT p95 (ms)")
    for ax, title in zip(axes, ("Throughput per GPU against per user", "Throughput per GPU against TTFT p95"),
                         strict=True):
        ax.set_ylabel("output tok/s per GPU")
        ax.set_title(title)
        ax.margins(x=0.08, y=0.12)
        _from_zero(ax, x=True)
    figure_legend(fig, axes, [
        Line2D([], [], ls="none", marker="o", ms=7, color="#555555", label="every SLO met"),
        Line2D([], [], ls="none", marker="o", ms=7, mfc=to_rgba("#555555", 0.3), mec=SLO_COLOR, mew=2.2,
               label="an SLO broken"),
        Line2D([], [], ls="none", marker="o", ms=7, mfc="white", mec="#555555", label="no SLO to judge")])
    key = f"frontier-{workload}"
    name_axes(key, axes)
    renderer = laid_out(fig)
    for ax, items in zip(axes, labels, strict=True):
        place_labels(renderer, ax, items)
    return svg_of(fig, key)


def write_sweep_report(summary: dict[str, Any], out_dir: str) -> list[str]:
    charts = {f"frontier:{w}": frontier_chart(p, w) for w, p in summary["frontier"].items()}
    bl = sweep_blocks(summary)
    return write_files(out_dir, {
        "sweep.json": json.dumps(clean(summary), indent=2, default=str),
        "sweep.md": render_markdown(bl, charts, "sweep.html"),
        "sweep.html": render_html(bl, charts, "llmload sweep"),
    })


def _price(b: dict[str, Any]) -> str:
    """$/month with a target, else $ per 1M output tokens (how the sweep ranked them)."""
    if b.get("usd_per_month") is not None:
        return f"{money(b['usd_per_month'])}/month"
    return f"{money(b.get('usd_per_1m_output_tokens'))} per 1M output tokens"


def summary_text(summary: dict[str, Any]) -> str:
    """The answer per workload, for the console (every value with its unit; never a bare None)."""
    lines = []
    for w, b in summary["best"].items():
        if not b["deployment"]:
            lines.append(f"{w}: no deployment meets the SLOs ({b.get('note') or 'no cell finished'})")
            continue
        ru = b.get("runner_up")
        lines.append(f"{w}: {b['deployment']}, {b['replicas']} replica(s), {b['gpus']} GPU(s), {_price(b)}; "
                     + (f"runner-up {ru['deployment']}, {_price(ru)}; " if ru else "no runner-up; ")
                     + f"margin larger than noise: {_margin(b['margin_is_real'])}")
    return "\n".join(lines)


def cell_line(i: int, n: int, cell_id: str, result: dict[str, Any]) -> str:
    """``[1/8] slow.chat.r1: done, capacity 8 users, $0.294 per 1M output tokens`` (the console's line per cell)."""
    text = f"[{i}/{n}] {cell_id}: {result['status']}"
    if result["status"] == "done":
        cap, cost = result.get("capacity") or {}, result.get("cost") or {}
        if capacity_text(cap) == "none":
            text += f", no capacity: {cap.get('limited_by') or 'no step had a verdict'}"
        else:
            text += f", capacity {capacity_text(cap)}"
            if cost.get("usd_per_million_output_tokens") is not None:
                text += f", {money(cost['usd_per_million_output_tokens'])} per 1M output tokens"
    if result.get("error"):
        text += f": {result['error'].splitlines()[0]}"
    return text
