"""Writing a comparison: compare.md, compare.html (one chart overlaying every run, SLO lines) and
compare.json; and the lines ``llmload compare`` prints.

Usage::

    paths = write_comparison(cmp, "runs/")     # runs/compare.json, compare.md, compare.html
    print(comparison_text(cmp))
"""

from __future__ import annotations

import json

from llmload.report import charts as ch
from llmload.report.compare.compare_runs import COLUMNS, Comparison
from llmload.report.document import Block, clean, render_html, render_markdown, write_files
from llmload.report.format import fmt
from llmload.report.sections.models import compare_models, compare_models_table


def comparison_blocks(cmp: Comparison) -> list[Block]:
    first = cmp.runs[0].report
    slos = ", ".join(s.text() for s in first.overall.slos if s.metric != "error_rate" or s.scenario) or "none"
    matched = "none" if cmp.matched_level is None else f"{cmp.matched_level:g} ({cmp.level_label})"
    out = [Block("llmload comparison", 1, text=[
        f"{len(cmp.runs)} runs under the same SLOs ({slos}), error budget ({first.error_budget}) and warm-up "
        f"{first.warmup_s:g} s; capacity is the highest step meeting every SLO below the first failing one "
        f"(steps by {cmp.level_label}). Matched load for latencies: {matched}."])]
    out.append(Block("Side by side", 2, header=["", *[r.label for r in cmp.runs]],
                     rows=[[c.title, *[c.fmt(c.value(r)) for r in cmp.runs]] for c in COLUMNS]))
    by_model = compare_models([(r.label, r.report) for r in cmp.runs])
    if by_model:  # every run has models: mixes
        header, rows = compare_models_table(by_model, [r.label for r in cmp.runs])
        out.append(Block("Per model", 2, header=header, rows=rows))
    out.append(Block("Throughput vs latency", 2, chart="curves",
                     caption=ch.CAPTIONS["curves"].format(label=cmp.level_label)))
    real = [r for r in cmp.noise if r["verdict"] == "real"]
    if cmp.noise:
        out.append(Block(f"Against {cmp.runs[0].label}: real difference or noise", 2, text=[
            f"{len(real)} of {len(cmp.noise)} metric-and-step differences are real (latency: a 99 % bootstrap "
            "interval of the percentiles' difference excludes 0; throughput needs repeats)."],
            header=["run", "level", "metric", "baseline", "run's", "difference", "99 % interval", "verdict"],
            rows=[[r["run"], f"{r['level']:g}", r["metric"], fmt(r["base"], 2), fmt(r["value"], 2),
                   "–" if r["pct"] is None else f"{r['pct']:+.1f} %",
                   "–" if r["low_pct"] is None else f"{r['low_pct']:+.1f} … {r['high_pct']:+.1f} %", r["verdict"]]
                  for r in cmp.noise if r["metric"].endswith("p95_ms") or r["verdict"] == "real"]))
    runs = [Block("Runs", 2, header=["label", "prefix", "steps measured", "warnings"],
                  rows=[[r.label, f"`{r.prefix}`", str(len(r.report.overall.steps)),
                         str(len(r.report.warnings))] for r in cmp.runs])]
    warn = [f"- {r.label}: {w}" for r in cmp.runs for w in r.report.warnings]
    notes = [f"- {n}" for n in cmp.notes]
    return out + runs + ([Block("Warnings", 2, text=warn)] if warn else []) + \
        ([Block("Notes", 2, text=notes)] if notes else [])


def write_comparison(cmp: Comparison, out_dir: str, name: str = "compare") -> list[str]:
    series = [(r.label, [s.data for s in r.report.overall.steps], r.report.overall.capacity) for r in cmp.runs]
    charts = {"curves": ch.compare_curves(series, cmp.runs[0].report.overall.slos, cmp.level_label)}
    bl = comparison_blocks(cmp)
    return write_files(out_dir, {
        f"{name}.json": json.dumps(clean(cmp.to_json()), indent=2),
        f"{name}.md": render_markdown(bl, charts, f"{name}.html"),
        f"{name}.html": render_html(bl, charts, "llmload comparison"),
    })


def comparison_text(cmp: Comparison) -> str:
    """One line per run for the terminal."""
    by_key = {c.key: c for c in COLUMNS}
    lines = []
    for r in cmp.runs:
        parts = [f"{by_key[k].title}: {by_key[k].fmt(by_key[k].value(r))}"
                 for k in ("capacity_level", "capacity_rps", "usd_per_request", "prefix_cache_hit_ratio")]
        lines.append(f"{r.label}: " + "; ".join(parts))
    return "\n".join(lines + [f"note: {n}" for n in cmp.notes])
