"""Writing the report: report.json, report.md, report.html (charts inline) and the vLLM export.

Without ``--out`` the files are named after the prefix (``runs/chat_report.html``, ...), so two
reports in one folder never overwrite each other; with ``--out DIR`` they are ``DIR/report.*``.
Markdown and HTML come from the same blocks (:mod:`llmload.report.document`); a section with
nothing to show is left out.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np

from llmload import files
from llmload.metrics import catalog
from llmload.metrics.confidence import settle_text
from llmload.report import charts as ch
from llmload.report.document import Block, clean, render_html, render_markdown, write_files
from llmload.report.format import fmt, fmt_usd, money
from llmload.report.model import Report, Section
from llmload.report.run_identity import manifest_rows
from llmload.report.sections.classes import classes_json, classes_summary, classes_tables
from llmload.report.sections.gpu import gpu_table
from llmload.report.sections.models import models_json, models_tables
from llmload.report.sections.replicas import replicas_table
from llmload.report.sections.server import server_table
from llmload.report.sections.traffic import traffic_json, traffic_tables

REPORT_FILES = ("report.json", "report.md", "report.html", "vllm_bench_serve.json")
_REPORTED = [m for m in catalog.ROW_METRICS if m.report]  # the step table's latency columns, in catalog order


def _pq(d: dict[str, Any], qs: tuple[str, ...] = ("p50", "p95", "p99")) -> str:
    return " / ".join(fmt(d.get(q), 1) for q in qs)


def _capacity_blocks(sec: Section, title: str) -> list[Block]:
    cap = sec.capacity
    rows = [["SLOs", ", ".join(s.text() for s in sec.slos) or "none"],
            ["capacity (users)", fmt(cap.get("users"))],
            *([["capacity (arrival rate, req/s)", fmt(cap.get("arrival_rate"), 3)]]
              if cap.get("arrival_rate") is not None else []),
            ["capacity (req/s, measured)", fmt(cap.get("rps"), 3)],
            ["output tok/s at capacity", fmt(cap.get("output_tps"), 1)],
            ["goodput req/s at capacity", fmt(cap.get("goodput_rps"), 3)],
            *([[f"{catalog.RTFX.label} at capacity (audio s per s)", fmt(cap[catalog.RTFX.name], 2)]]
              if cap.get(catalog.RTFX.name) is not None else []),
            ["limited by", str(cap.get("limited_by", "–"))]]
    if "interpolated_rps" in cap:
        rows.append(["estimate between steps (req/s, interpolated, not used for cost)",
                     fmt(cap["interpolated_rps"], 3)])
    if cap.get("borderline"):
        rows.append(["borderline verdicts (limit inside the 95 % interval)", "; ".join(borderline_notes(sec))])
    for skipped in cap.get("never_capacity") or []:
        rows.append([f"not capacity: step {skipped['level']:g}", skipped["why"]])
    if cap.get("gpu"):
        rows += [["GPU J per output token at capacity", fmt(cap["gpu"]["j_per_output_token"], 4)],
                 ["GPU bound by at capacity", str(cap["gpu"]["bound_by"])]]
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
        if catalog.AUDIO_HOUR_PRICE in c:
            crow.append([f"$ per audio hour (the hour's price / {catalog.RTFX.label})",
                         fmt_usd(c[catalog.AUDIO_HOUR_PRICE])])
        if c.get("energy_usd_per_hour") is not None:
            crow += [[f"GPU energy $/hour (measured power at ${c['usd_per_kwh']:g}/kWh)",
                      fmt_usd(c["energy_usd_per_hour"])],
                     ["GPU energy $ per 1M output tokens", fmt_usd(c.get("energy_usd_per_million_output_tokens"))]]
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


def _verdict_text(d: dict[str, Any]) -> str:
    v = d["verdict"]
    if v.startswith("broken"):
        v = v.replace("broken", "broken: " + ", ".join(k for k, x in d["slo"].items() if not x["met"]), 1)
    return v + (f" ({d['note']})" if d.get("note") else "")


def _ended_text(d: dict[str, Any]) -> str:
    """How a step of the precision stop ended (PREFIX_run.json's shape.step_log)."""
    if "ended" not in d:
        return "–"
    return ("early: " if d["ended"] == "precise" else "at the cap: ") + d.get("ended_why", "")


def _steps_block(sec: Section, title: str, report: Report) -> Block:
    open_loop = report.level == "arrival_rate"
    header = [report.level_label, *(["users"] if open_loop else []), "measured s", "requests (ok)", "errors",
              "req/s", "out tok/s", "total tok/s", *(f"{m.label} {'/'.join(m.report)}" for m in _REPORTED),
              "goodput req/s", "SLO"]
    ended = any("ended" in s.data for s in sec.steps)
    if ended:
        header.append("step ended")
    audio = any(catalog.RTFX.name in s.data for s in sec.steps)  # transcription: the run's and each request's RTFx
    if audio:
        header.insert(header.index("goodput req/s"), f"{catalog.RTFX.label} (run / request p50)")
    rows = []
    for s in sec.steps:
        d = s.data
        rtfx = ([f"{fmt(d.get(catalog.RTFX.name), 2)} / {fmt(d[catalog.REQUEST_RTFX.name]['p50'], 2)}"]
                if audio and catalog.REQUEST_RTFX.name in d else ["–"] if audio else [])
        rows.append([f'{d["level"]:g}', *([str(d["users"])] if open_loop else []), fmt(d["duration_s"], 1),
                     f'{d["requests"]} ({d["ok"]})', str(d["errors"]), fmt(d["rps"], 3), fmt(d["output_tps"], 1),
                     fmt(d["total_tps"], 1), *(_pq(d[m.row_column], m.report) for m in _REPORTED), *rtfx,
                     fmt(d["goodput_rps"], 3), _verdict_text(d), *([_ended_text(d)] if ended else [])])
    return Block(title, 3, header=header, rows=rows)


def _ci(ci: list[float | None], nd: int) -> str:
    lo, hi = ci
    return f"[{'−∞' if lo is None else fmt(lo, nd)}, {'∞' if hi is None else fmt(hi, nd)}]"


def borderline_notes(sec: Section) -> list[str]:
    """Each borderline verdict of the capacity step and the first failing one (``capacity.borderline``)
    with what would settle it: ``tpot_p95_ms at 16 users: about 74 more requests, or 9.9 s more at
    this step, would settle it`` (the page and the console say the same)."""
    cap = sec.capacity
    judged = [s.data for s in sec.steps if not s.data["thin"]]
    picked = [d for d in judged if d["start_time"] == cap.get("start_time")][-1:]
    picked += [d for d in judged if d["level"] == cap.get("next_step_level") and not d["slo_met"]
               and not d.get("never_capacity")][:1]
    out = []
    for d in picked:
        unit = "req/s" if d.get("arrival_rate") is not None else "users"
        out += [f"{k} at {d['level']:g} {unit}: {settle_text(v)}" for k, v in d["slo"].items() if v.get("borderline")]
    return out or list(cap["borderline"])


def _slo_block(sec: Section, title: str, label: str) -> Block:
    """Each SLO at each step: value, its 95 % interval and sample count, and what would settle it."""
    rows = []
    for s in sec.steps:
        d = s.data
        if d["thin"]:
            continue
        for metric, v in d["slo"].items():
            nd = 4 if metric.rsplit(":", 1)[-1] == "error_rate" else 1
            verdict = ("met" if v["met"] else "broken") + (" — borderline: " + settle_text(v) if v["borderline"]
                                                           else "")
            rows.append([f'{d["level"]:g}', metric, fmt(v["value"], nd), _ci(v["ci95"], nd), str(v["n"]),
                         fmt(v["limit"], nd if v["limit"] < 1 else 1), verdict])
    return Block(title, 3, header=[label, "SLO", "value", "95 % interval", "n", "limit", "verdict"], rows=rows)


def _caption(key: str, label: str) -> str:
    return ch.CAPTIONS[key].format(label=label)


def _header_blocks(report: Report) -> list[Block]:
    o = report.overall
    n_ok = int(report.df["ok"].sum())
    text = [f"Source: `{report.source}` — {len(report.df):,} requests ({n_ok:,} ok), {len(o.steps)} measured "
            f"step(s), warm-up {report.warmup_s:g} s after each change of the load (not measured); a step needs "
            f"{report.options.sample_floor} ok requests for a verdict. Error budget: {report.error_budget}."]
    out = [Block("llmload capacity report", 1, text=text)]
    if report.manifest:
        out.append(Block("Run", 2, header=["", ""], rows=manifest_rows(report.manifest)))
    if report.warnings:
        out.append(Block("Warnings", 2, text=[f"- {w}" for w in report.warnings]))
    return out


def blocks(report: Report) -> list[Block]:
    o = report.overall
    label = report.level_label
    out = _header_blocks(report)
    out += _capacity_blocks(o, "Capacity (whole run)")
    out.append(Block("Charts", 2, chart="throughput_latency", caption=_caption("throughput_latency", label)))
    out.append(_steps_block(o, "Steps (whole run)", report))
    out.append(_slo_block(o, "SLO verdicts per step (95 % intervals)", label))
    out += [Block(chart=key, caption=_caption(key, label)) for key in ("percentiles", "tokens", "errors", "ttft_time")]
    if len(report.scenarios) > 1:
        for name, sec in report.scenarios.items():
            out += _capacity_blocks(sec, f"Scenario {name}")
            out.append(_steps_block(sec, f"Steps of {name}", report))
            out.append(_slo_block(sec, f"SLO verdicts of {name}", label))
    # the engine's metrics (the fleet's, then each replica's) and the GPUs', when scraped
    for table in (server_table(report), replicas_table(report), gpu_table(report)):
        if table:
            heading, text, header, rows = table
            out.append(Block(heading, 2, text=text, header=header, rows=rows))
            if heading == "GPUs":
                out.append(Block(chart="gpu", caption=_caption("gpu", label)))
    # A run whose server reports cached_tokens but never hit the cache (a chat run) has no section.
    caches = [(n, s.prefix_cache) for n, s in report.scenarios.items()
              if s.prefix_cache and s.prefix_cache.get("requests_with_hits")]
    if caches:
        def side(d: dict[str, Any]) -> str:
            return f"{d['requests']}: {fmt(d['p50'], 1)} / {fmt(d['p95'], 1)}"

        rows = [[n, fmt(c["hit_ratio_tokens"], 3), fmt(c["requests_with_hits"], 3), side(c["ttft_ms_hit"]),
                 side(c["ttft_ms_miss"])] for n, c in caches]
        out.append(Block("Prefix cache", 2, header=["scenario", "cached ÷ prompt tokens", "requests with a hit",
                                                    "TTFT p50/p95, hits (n: ms)", "TTFT p50/p95, misses (n: ms)"],
                         rows=rows))
    # production-shaped workloads: agent tasks, text vs image input, schedule lag (llmload.report.sections.traffic)
    out += [Block(h, 2, header=hd, rows=r) for h, hd, r in traffic_tables(traffic_json(report))]
    out += [Block(h, 2, header=hd, rows=r) for h, hd, r in classes_tables(classes_json(report))]  # priority:
    out += [Block(h, 2, header=hd, rows=r) for h, hd, r in models_tables(models_json(report))]  # models: mixes
    out.append(Block("Notes", 2, text=[f"- {n}" for n in report.notes] + [
        "- Latency percentiles are over ok requests that started in a step's measured window, each with its "
        "sample count and a 95 % order-statistic interval; a verdict whose limit lies inside the interval is "
        "borderline. req/s, tok/s and goodput count each ok request once, spread over its lifetime, so a window "
        "gets the share that falls inside it (this agrees with Little's law on short steps). Goodput counts ok "
        "requests that meet every latency SLO on their own; a failed request is never good.",
        "- Capacity is the highest measured step that meets every SLO below the first step that breaks one; a "
        "passing step above a failing one is a warning, never capacity. A step with too few ok requests has no "
        "verdict. Cost and plan use the capacity step's own numbers; an estimate between steps is shown "
        "separately and never priced.",
        "- " + " ".join(f"{m.label} (`{m.row_column}`): {m.description}." for m in _REPORTED)]))
    return out


def _total(rows: Any, column: str) -> int:
    """A whole-count column's sum, exact: added in float64 (the report reads counts as float32)."""
    return int(np.nansum(rows[column].to_numpy(dtype=np.float64))) if column in rows else 0


def vllm_export(report: Report) -> list[dict[str, Any]]:
    """Per step, the keys of `vllm bench serve --save-result` that the CSV can fill."""
    df = report.df
    out = []
    for step in report.overall.steps:
        d = step.data
        m = df["ok"] & (df["start_time"] >= step.measured_from) & (df["start_time"] < step.end)
        cols = [c for c in ("prompt_tokens", "completion_tokens", *(x.row_column for x in catalog.ROW_METRICS))
                if c in df.columns]
        rows = df.loc[m.to_numpy(), cols]  # only what the export reads: a 10 M-row frame has many columns
        entry: dict[str, Any] = {
            "llmload_users": d["users"], "max_concurrency": d["users"], "duration": d["duration_s"],
            "request_rate": d["arrival_rate"] if d["arrival_rate"] is not None else "inf",
            "completed": int(len(rows)), "failed": d["errors"],
            "total_input_tokens": _total(rows, "prompt_tokens") if "prompt_tokens" in rows else None,
            "total_output_tokens": _total(rows, "completion_tokens"),
            "request_throughput": d["rps"], "output_throughput": d["output_tps"],
            "total_token_throughput": d["total_tps"], "request_goodput": d["goodput_rps"],
        }
        for col, name in ((m.row_column, m.vllm) for m in catalog.ROW_METRICS if m.vllm):
            v = rows[col].dropna().to_numpy(dtype=float) if col in rows else []
            if len(v):
                entry[f"mean_{name}_ms"] = float(v.mean())
                entry[f"median_{name}_ms"] = float(np.median(v))
                entry[f"std_{name}_ms"] = float(v.std())
                for q in (90, 95, 99):
                    entry[f"p{q}_{name}_ms"] = float(np.percentile(v, q))
        out.append(entry)
    return out


def report_names(name_prefix: str = "") -> dict[str, str]:
    """The file names of a report: ``report.md`` ..., or ``PREFIX_report.md`` ... with ``name_prefix``."""
    return {n: name_prefix + n for n in REPORT_FILES}


def default_out(source: str) -> tuple[str, str]:
    """(directory, name prefix) of a report written without ``--out``: next to the CSV, after its prefix."""
    base = files.prefix_of(source)  # PREFIX_requests.csv, PREFIX_requests.worker0.csv
    return os.path.dirname(base) or ".", os.path.basename(base) + "_"


def write_all(report: Report, out_dir: str, name_prefix: str = "") -> list[str]:
    """Write the report's four files into ``out_dir``; their paths (md, html, json, vLLM export order
    as :data:`REPORT_FILES`)."""
    names = report_names(name_prefix)
    o = report.overall
    steps, label = [s.data for s in o.steps], report.level_label
    charts = {
        "throughput_latency": ch.throughput_latency(steps, o.slos, o.capacity, label),
        "percentiles": ch.percentiles_per_step(steps, label),
        "tokens": ch.tokens_per_step(steps, label),
        "errors": ch.errors_per_step(steps, label),
        "ttft_time": ch.ttft_over_time(report.df),
        "gpu": ch.gpu_per_step(steps, label),
    }
    bl = blocks(report)
    return write_files(out_dir, {
        names["report.json"]: json.dumps(clean({**report.to_json(), **traffic_json(report),
                                                      **classes_json(report), **models_json(report)}), indent=2),
        names["report.md"]: render_markdown(bl, charts, names["report.html"]),
        names["report.html"]: render_html(bl, charts),
        names["vllm_bench_serve.json"]: json.dumps(clean(vllm_export(report)), indent=2),
    })


def summary_text(report: Report) -> str:
    """A few lines for the terminal; the capacity line carries its caveats."""
    o = report.overall
    cap = o.capacity
    rate = f" (arrival rate {cap['arrival_rate']:g} req/s)" if cap.get("arrival_rate") is not None else ""
    caveats = [f"{t['level']:g}: only {t['ok']} ok requests, no verdict" for t in cap.get("thin_above") or []]
    if cap.get("non_monotone"):
        caveats.append("non-monotone: passing step(s) above a failing one")
    if cap.get("borderline"):
        caveats.append("borderline: " + "; ".join(borderline_notes(o)))
    found = (f"{cap['users']} users{rate}, {fmt(cap.get('rps'), 3)} req/s, {fmt(cap.get('output_tps'), 1)} output "
             "tok/s" if cap.get("users") is not None else "none")
    lines = [f"capacity: {found} — limited by {cap.get('limited_by') or 'no verdict'}"
             + (f" [caveat: {'; '.join(caveats)}]" if caveats else "")]
    if "interpolated_rps" in cap:
        lines.append(f"  estimate between steps (interpolated): {cap['interpolated_rps']:.3f} req/s")
    if o.cost:
        lines.append(f"cost: {money(o.cost['usd_per_request'])} per request, "
                     f"{money(o.cost['usd_per_million_output_tokens'])} per 1M output tokens")
    if cap.get("gpu"):
        lines.append(f"GPUs at capacity: {fmt(cap['gpu']['j_per_output_token'], 4)} J per output token, "
                     f"{cap['gpu']['bound_by']}")
    if o.plan and o.plan.get("replicas") is None:
        lines.append(f"plan: none for {o.plan['target_rps']:.3f} req/s ({o.plan.get('note') or 'no capacity'})")
    elif o.plan:
        month = o.plan.get("usd_per_month")
        lines.append(f"plan: {o.plan['replicas']} replica(s), {o.plan['gpus']} GPU(s)"
                     + (f", {money(month)}/month" if month is not None else " (no price: --gpu-hourly-usd)")
                     + f" for {o.plan['target_rps']:.3f} req/s")
    lines.append(f"error budget: {report.error_budget}")
    ended = [s.data for s in o.steps if "ended" in s.data]
    if ended:
        lines.append("steps: " + ", ".join(f"{fmt(d['level'])} users " + ("ended early" if d["ended"] == "precise"
                                                                         else "ran to the cap") for d in ended))
    lines += classes_summary(classes_json(report))  # priority classes, when the rows carry them
    lines += [f"warning: {w}" for w in report.warnings]
    return "\n".join(lines)
