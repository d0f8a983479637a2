"""Writing the report: report.json, report.md, report.html (charts inline) and the vLLM export.

Markdown and HTML are rendered from the same list of blocks (heading, text, table), so they
always say the same thing.
"""

from __future__ import annotations

import base64
import html
import json
import math
import os
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from llmload.report import charts as ch
from llmload.report.format import fmt, fmt_usd
from llmload.report.model import Report, Section
from llmload.report.server import server_table
from llmload.report.tasks import traffic_json, traffic_tables


@dataclass
class Block:
    heading: str = ""
    level: int = 2
    text: list[str] = field(default_factory=list)
    header: list[str] = field(default_factory=list)
    rows: list[list[str]] = field(default_factory=list)
    chart: str = ""  # key into the charts dict (HTML only)


def _clean(obj: Any) -> Any:
    """JSON without NaN/inf (never valid JSON)."""
    if isinstance(obj, float) and (math.isnan(obj) or math.isinf(obj)):
        return None
    if isinstance(obj, dict):
        return {k: _clean(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [_clean(v) for v in obj]
    return obj


def _pq(d: dict[str, Any], qs: tuple[str, ...] = ("p50", "p95", "p99")) -> str:
    return " / ".join(fmt(d.get(q), 1) for q in qs)


def _capacity_blocks(sec: Section, title: str) -> list[Block]:
    cap = sec.capacity
    rows = [["SLOs", ", ".join(s.text() for s in sec.slos) or "none given"],
            ["capacity (users)", fmt(cap.get("users"))],
            *([["capacity (arrival rate, req/s)", fmt(cap.get("arrival_rate"), 3)]]
              if cap.get("arrival_rate") is not None else []),
            ["capacity (req/s, measured)", fmt(cap.get("rps"), 3)],
            ["output tok/s at capacity", fmt(cap.get("output_tps"), 1)],
            ["goodput req/s at capacity", fmt(cap.get("goodput_rps"), 3)],
            ["limited by", str(cap.get("limited_by", "–"))]]
    if "interpolated_rps" in cap:
        rows.append(["estimate between steps (req/s, interpolated, not used for cost)",
                     fmt(cap["interpolated_rps"], 3)])
    blocks = [Block(title, 2, header=["", ""], rows=rows)]
    if sec.cost:
        c = sec.cost
        crow = [["$/hour per replica", fmt_usd(c["usd_per_hour"]) + f" ({c['gpus_per_replica']} GPU)"],
                ["$ per request", fmt_usd(c["usd_per_request"])],
                ["$ per good request (meets every SLO)", fmt_usd(c["usd_per_good_request"])],
                ["$ per 1M output tokens", fmt_usd(c["usd_per_million_output_tokens"])],
                ["$ per 1M total tokens", fmt_usd(c["usd_per_million_total_tokens"])]]
        if "usd_per_million_input_tokens" in c:
            crow += [[f"$ per 1M input tokens (output weighted ×{c['output_cost_weight']:g})",
                      fmt_usd(c["usd_per_million_input_tokens"])],
                     ["$ per 1M output tokens (weighted)", fmt_usd(c["usd_per_million_output_tokens_weighted"])]]
        blocks.append(Block("Cost at capacity", 3, header=["", ""], rows=crow))
    if sec.plan:
        p = sec.plan
        prow = [["target req/s", fmt(p["target_rps"], 3)], ["headroom", f"{p['headroom']:.0%}"]]
        if "daily_requests" in p:
            prow.insert(0, ["daily requests × peak factor", f"{p['daily_requests']:,.0f} × {p['peak_factor']:g}"])
        prow += [["req/s per replica (capacity × (1 − headroom))", fmt(p.get("rps_per_replica"), 3)],
                 ["replicas", fmt(p.get("replicas"))], ["GPUs", fmt(p.get("gpus"))],
                 ["$ per month (730 h)", fmt_usd(p.get("usd_per_month"))]]
        if p.get("note"):
            prow.append(["note", p["note"]])
        blocks.append(Block("Fleet plan", 3, header=["", ""], rows=prow))
    return blocks


def _steps_block(sec: Section, title: str, label: str) -> Block:
    header = [label, "users", "measured s", "requests", "errors", "req/s", "out tok/s", "total tok/s",
              "TTFT p50/p95/p99", "TPOT p50/p95/p99", "E2E p50/p95/p99", "worst stall p99", "goodput req/s",
              "SLO"]
    rows = []
    for s in sec.steps:
        d = s.data
        verdict = "–" if d["slo_met"] is None else ("met" if d["slo_met"] else "broken: " + ", ".join(
            k for k, v in d["slo"].items() if not v["met"]))
        if d.get("note"):
            verdict += f" ({d['note']})"
        rows.append([f'{d["level"]:g}', str(d["users"]), fmt(d["duration_s"], 1), str(d["requests"]), str(d["errors"]),
                     fmt(d["rps"], 3), fmt(d["output_tps"], 1), fmt(d["total_tps"], 1), _pq(d["ttft_ms"]),
                     _pq(d["tpot_ms"]), _pq(d["e2e_ms"]), fmt(d["itl_max_ms"]["p99"], 1), fmt(d["goodput_rps"], 3),
                     verdict])
    return Block(title, 3, header=header, rows=rows)


def blocks(report: Report) -> list[Block]:
    o = report.overall
    n_ok = int(report.df["ok"].sum())
    out = [Block("llmload capacity report", 1, text=[
        f"Source: `{report.source}` — {len(report.df):,} requests ({n_ok:,} ok), "
        f"{len(o.steps)} measured step(s), warm-up {report.options.warmup_s:g} s after each change of the user "
        "count (not measured)."])]
    if report.warnings:
        out.append(Block("Warnings", 2, text=[f"- {w}" for w in report.warnings]))
    out += _capacity_blocks(o, "Capacity (whole run)")
    out.append(Block("Charts", 2, chart="throughput_latency"))
    out.append(_steps_block(o, "Steps (whole run)", report.level_label))
    out += [Block(chart="percentiles"), Block(chart="tokens"), Block(chart="errors"), Block(chart="ttft_time")]
    if len(report.scenarios) > 1:
        for name, sec in report.scenarios.items():
            out += _capacity_blocks(sec, f"Scenario {name}")
            out.append(_steps_block(sec, f"Steps of {name}", report.level_label))
    server = server_table(report)  # the engine's own metrics per step, when the run scraped them
    if server:
        heading, text, header, rows = server
        out.append(Block(heading, 2, text=text, header=header, rows=rows))
    caches = [(n, s.prefix_cache) for n, s in report.scenarios.items() if s.prefix_cache]
    if caches:
        def side(d: dict[str, Any]) -> str:
            return f"{d['requests']}: {fmt(d['p50'], 1)} / {fmt(d['p95'], 1)}"

        rows = [[n, fmt(c["hit_ratio_tokens"], 3), fmt(c["requests_with_hits"], 3), side(c["ttft_ms_hit"]),
                 side(c["ttft_ms_miss"])] for n, c in caches]
        out.append(Block("Prefix cache", 2, header=["scenario", "cached ÷ prompt tokens", "requests with a hit",
                                                    "TTFT p50/p95, hits (n: ms)", "TTFT p50/p95, misses (n: ms)"],
                         rows=rows))
    # production-shaped workloads: agent tasks, text vs image input, schedule lag (llmload.report.tasks)
    out += [Block(h, 2, header=hd, rows=r) for h, hd, r in traffic_tables(traffic_json(report))]
    out.append(Block("Notes", 2, text=[f"- {n}" for n in report.notes] + [
        "- Latency percentiles are over ok requests that started in a step's measured window; req/s, tok/s "
        "and goodput over ok requests that completed in it. Goodput counts requests that meet every "
        "latency SLO on their own. Capacity is the highest measured step that meets every SLO; an estimate "
        "between steps is shown separately and never priced.",
        "- TTFT: t0 → first output-carrying event (role-only chunks never count). TPOT: (E2E − TTFT) / "
        "(output tokens − 1). E2E: t0 → end of stream. Worst stall: the request's largest gap between output "
        "events (itl_max_ms)."]))
    return out


def render_markdown(bl: list[Block]) -> str:
    lines: list[str] = []
    for b in bl:
        if b.heading:
            lines += ["#" * b.level + " " + b.heading, ""]
        if b.text:
            lines += [*b.text, ""]
        if b.rows:
            lines.append("| " + " | ".join(b.header) + " |")
            lines.append("|" + "---|" * len(b.header))
            lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in b.rows]
            lines.append("")
        if b.chart:
            lines += ["(charts: see report.html)", ""] if b.chart == "throughput_latency" else []
    return "\n".join(lines)


CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1.5em}td,th{border:1px solid #ccc;padding:3px 8px;font-size:13px}
th{background:#f3f3f3}h1{font-size:1.6em}h2{border-bottom:1px solid #ddd;padding-bottom:2px}
img{max-width:100%}code{background:#f3f3f3;padding:1px 3px}"""


def render_html(bl: list[Block], charts: dict[str, bytes | None]) -> str:
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>llmload report</title>",
             f"<style>{CSS}</style></head><body>"]
    for b in bl:
        if b.heading:
            parts.append(f"<h{b.level}>{html.escape(b.heading)}</h{b.level}>")
        if b.text:
            items = [t[2:] if t.startswith("- ") else t for t in b.text]
            if all(t.startswith("- ") for t in b.text):
                parts.append("<ul>" + "".join(f"<li>{_inline(t)}</li>" for t in items) + "</ul>")
            else:
                parts += [f"<p>{_inline(t)}</p>" for t in items]
        if b.rows:
            head = "".join(f"<th>{html.escape(h)}</th>" for h in b.header)
            body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in b.rows)
            head_row = f"<tr>{head}</tr>" if any(b.header) else ""  # key/value tables need no header
            parts.append(f"<table>{head_row}{body}</table>")
        png = charts.get(b.chart) if b.chart else None
        if png:
            parts.append(f"<img alt='{b.chart}' src='data:image/png;base64,{base64.b64encode(png).decode()}'>")
    parts.append("</body></html>")
    return "\n".join(parts)


def _inline(text: str) -> str:
    out = html.escape(text)
    while "`" in out and out.count("`") >= 2:
        out = out.replace("`", "<code>", 1).replace("`", "</code>", 1)
    return out


def vllm_export(report: Report) -> list[dict[str, Any]]:
    """Per step, the keys of `vllm bench serve --save-result` that the CSV can fill."""
    df = report.df
    out = []
    for step in report.overall.steps:
        d = step.data
        m = df["ok"] & (df["start_time"] >= step.measured_from) & (df["start_time"] < step.end)
        rows = df[m]
        entry: dict[str, Any] = {
            "llmload_users": d["users"], "max_concurrency": d["users"], "duration": d["duration_s"],
            "request_rate": d["arrival_rate"] if d["arrival_rate"] is not None else "inf",
            "completed": int(len(rows)), "failed": d["errors"],
            "total_input_tokens": int(rows["prompt_tokens"].fillna(0).sum()) if "prompt_tokens" in rows else None,
            "total_output_tokens": int(rows["completion_tokens"].fillna(0).sum()),
            "request_throughput": d["rps"], "output_throughput": d["output_tps"],
            "total_token_throughput": d["total_tps"], "request_goodput": d["goodput_rps"],
        }
        for col, name in (("ttft_ms", "ttft"), ("tpot_ms", "tpot"), ("e2e_ms", "e2el")):
            v = rows[col].dropna().to_numpy(dtype=float) if col in rows else []
            if len(v):
                entry[f"mean_{name}_ms"] = float(v.mean())
                entry[f"median_{name}_ms"] = float(np.median(v))
                entry[f"std_{name}_ms"] = float(v.std())
                for q in (90, 95, 99):
                    entry[f"p{q}_{name}_ms"] = float(np.percentile(v, q))
        out.append(entry)
    return out


def write_all(report: Report, out_dir: str) -> list[str]:
    os.makedirs(out_dir, exist_ok=True)
    data = _clean({**report.to_json(), **traffic_json(report)})
    o = report.overall
    steps, label = [s.data for s in o.steps], report.level_label
    charts = {
        "throughput_latency": ch.throughput_latency(steps, o.slos, o.capacity, label),
        "percentiles": ch.percentiles_per_step(steps, label),
        "tokens": ch.tokens_per_step(steps, label),
        "errors": ch.errors_per_step(steps, label),
        "ttft_time": ch.ttft_over_time(report.df),
    }
    bl = blocks(report)
    paths = {
        "report.json": json.dumps(data, indent=2),
        "report.md": render_markdown(bl),
        "report.html": render_html(bl, charts),
        "vllm_bench_serve.json": json.dumps(_clean(vllm_export(report)), indent=2),
    }
    written = []
    for name, text in paths.items():
        path = os.path.join(out_dir, name)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            f.write(text)
        os.replace(tmp, path)
        written.append(path)
    return written


def summary_text(report: Report) -> str:
    """A few lines for the terminal."""
    o = report.overall
    cap = o.capacity
    rate = f" (arrival rate {cap['arrival_rate']:g} req/s)" if cap.get("arrival_rate") is not None else ""
    lines = [f"capacity: {fmt(cap.get('users'))} users{rate}, {fmt(cap.get('rps'), 3)} req/s, "
             f"{fmt(cap.get('output_tps'), 1)} output tok/s — limited by {cap.get('limited_by')}"]
    if "interpolated_rps" in cap:
        lines.append(f"  estimate between steps (interpolated): {cap['interpolated_rps']:.3f} req/s")
    if o.cost:
        lines.append(f"cost: ${fmt_usd(o.cost['usd_per_request'])} per request, "
                     f"${fmt_usd(o.cost['usd_per_million_output_tokens'])} per 1M output tokens")
    if o.plan:
        lines.append(f"plan: {fmt(o.plan.get('replicas'))} replica(s), {fmt(o.plan.get('gpus'))} GPU(s), "
                     f"${fmt_usd(o.plan.get('usd_per_month'))}/month for {o.plan['target_rps']:.3f} req/s")
    lines += [f"warning: {w}" for w in report.warnings]
    return "\n".join(lines)
