"""``llmload compare``: several runs side by side under the same SLOs and prices.

Each run is reported as ``llmload report`` would (same options), then every run gets one value
per :data:`COLUMNS` entry: capacity, cost per request and per good request, $ per million output
tokens, TTFT/TPOT percentiles at a *matched load* (the highest level every run measured with a
verdict, or ``--at``) and the prefix-cache hit ratio. A run without a capacity is shown as such.

``COLUMNS`` is a list of specs (key, title, value, format): a new comparison is one more entry
(the server's side, from :func:`llmload.report.sections.server.server_columns`, is five of them; the GPUs'
J per output token, bound-by and energy cost, from :func:`llmload.report.sections.gpu.gpu_columns`, three), and each
run's steps stay the report's step dicts, which other modules add keys to (``server``).

Usage::

    cmp = compare_runs(["runs/cached", "runs/uncached"], ["cached", "uncached"], ReportOptions(...))
    cmp.to_json()["runs"][0]["usd_per_request"]
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from llmload import files
from llmload.metrics import catalog
from llmload.report.build import build_report
from llmload.report.format import fmt, fmt_pct, fmt_usd
from llmload.report.load import ReportError
from llmload.report.model import Report, ReportOptions
from llmload.report.sections.gpu import gpu_columns
from llmload.report.sections.models import compare_models
from llmload.report.sections.server import server_columns


@dataclass
class Run:
    label: str
    prefix: str
    report: Report
    matched: dict[str, Any] | None = None  # the step at the matched load


@dataclass
class Column:
    key: str
    title: str
    value: Callable[[Run], Any]
    fmt: Callable[[Any], str] = fmt


def _cap(run: Run) -> dict[str, Any]:
    return run.report.overall.capacity


def _cost(key: str) -> Callable[[Run], Any]:
    return lambda run: (run.report.overall.cost or {}).get(key)


def _at(field_: str, q: str) -> Callable[[Run], Any]:
    return lambda run: None if run.matched is None else run.matched[field_].get(q)


def _gpu(key: str) -> Callable[[Run], Any]:
    return lambda r: gpu_columns(r.report).get(key)


def _server(key: str) -> Callable[[Run], Any]:
    return lambda run: server_columns(run.report).get(key)


def _capacity_text(v: Any) -> str:
    return v if isinstance(v, str) else fmt(v)


def _capacity_value(run: Run) -> Any:
    cap = _cap(run)
    level = cap.get("level")
    return level if level is not None else f"none ({cap.get('limited_by') or 'no verdict'})"


COLUMNS: list[Column] = [
    Column("run_id", "run id", lambda r: r.report.run_id, lambda v: v or "–"),
    Column("capacity_level", "capacity (users or arrival req/s)", _capacity_value, _capacity_text),
    Column("capacity_rps", "capacity req/s (measured)", lambda r: _cap(r).get("rps"), lambda v: fmt(v, 3)),
    Column("capacity_output_tps", "output tok/s at capacity", lambda r: _cap(r).get("output_tps"),
           lambda v: fmt(v, 1)),
    Column("limited_by", "limited by", lambda r: _cap(r).get("limited_by"), lambda v: str(v or "–")),
    Column("usd_per_request", "$ per request", _cost("usd_per_request"), fmt_usd),
    Column("usd_per_good_request", "$ per good request", _cost("usd_per_good_request"), fmt_usd),
    Column("usd_per_million_output_tokens", "$ per 1M output tokens", _cost("usd_per_million_output_tokens"),
           fmt_usd),
    # the GPUs at capacity (runs with PREFIX_gpu_metrics.csv; "–" for the others), llmload.report.sections.gpu
    Column("j_per_output_token", "GPU J per output token at capacity", _gpu("j_per_output_token"),
           lambda v: fmt(v, 4)),
    Column("gpu_bound_by", "GPU bound by at capacity", _gpu("gpu_bound_by"), lambda v: str(v or "–")),
    Column("energy_usd_per_million_output_tokens", "GPU energy $ per 1M output tokens",
           _gpu("energy_usd_per_million_output_tokens"), fmt_usd),
    Column("matched_level", "matched load (level)", lambda r: None if r.matched is None else r.matched["level"],
           lambda v: "–" if v is None else f"{v:g}"),
    *[Column(f"{m.name}_{q}_at_matched", f"{m.title(q)} at matched load ({m.unit})", _at(m.row_column, q),
             lambda v: fmt(v, 1)) for m in catalog.HEADLINE for q in m.report],
    Column("prefix_cache_hit_ratio", "prefix-cache hit ratio (cached ÷ prompt tokens)",
           lambda r: (r.report.overall.prefix_cache or {}).get("hit_ratio_tokens"), lambda v: fmt(v, 3)),
    # the server's side (runs with PREFIX_server_metrics.csv; "–" for the others), llmload.report.sections.server
    # (the KV cache as a percentage, as the report's server table shows it; compare.json keeps the 0..1 share)
    *[Column(key, title, _server(key), lambda v, nd=nd: v if isinstance(v, str) else fmt(v, nd))
      for key, title, nd in (("server_limited_by", "server-side limited by", 0),)],
    Column("server_kv_usage_max", "KV-cache usage max at capacity (%)", _server("server_kv_usage_max"), fmt_pct),
    *[Column(key, title, _server(key), lambda v, nd=nd: v if isinstance(v, str) else fmt(v, nd))
      for key, title, nd in (("server_waiting_mean", "server queue (waiting) mean at capacity", 1),
                             ("server_ttft_p50_ms", "server TTFT p50 at capacity (ms)", 1),
                             ("ttft_gap_mean_ms", "TTFT gap client − server at capacity (ms)", 1))],
]


@dataclass
class Comparison:
    runs: list[Run]
    options: ReportOptions
    matched_level: float | None
    level_label: str
    notes: list[str] = field(default_factory=list)
    noise: list[dict[str, Any]] = field(default_factory=list)  # report.compare_noise rows, vs the first run

    def to_json(self) -> dict[str, Any]:
        out_runs = []
        for run in self.runs:
            o = run.report.overall
            entry: dict[str, Any] = {"label": run.label, "prefix": run.prefix}
            entry.update({c.key: c.value(run) for c in COLUMNS})
            entry.update({"capacity": o.capacity, "cost": o.cost, "prefix_cache": o.prefix_cache,
                          "warnings": run.report.warnings, "steps": [s.data for s in o.steps]})
            out_runs.append(entry)
        return {"slos": [s.text() for s in self.runs[0].report.overall.slos] if self.runs else [],
                "error_budget": self.runs[0].report.error_budget if self.runs else None,
                "steps_by": self.runs[0].report.level if self.runs else None,
                "matched_level": self.matched_level, "notes": self.notes, "runs": out_runs,
                "models": compare_models([(r.label, r.report) for r in self.runs]),  # runs with models: mixes
                "noise": [{k: v for k, v in r.items() if not k.startswith("_")} for r in self.noise]}


def _judged_levels(report: Report) -> set[float]:
    return {float(s.data["level"]) for s in report.overall.steps if not s.data.get("thin")}


def _per_run(values: Sequence[Any] | None, n: int, what: str) -> list[Any]:
    if not values:
        return [None] * n
    if len(values) == 1:
        return list(values) * n
    if len(values) != n:
        raise ReportError(f"{what}: give one value, or one per run ({n}), got {len(values)}")
    return list(values)


def compare_runs(prefixes: Sequence[str], labels: Sequence[str] | None, opts: ReportOptions,
                 at: float | None = None, gpu_hourly_usd: Sequence[float] | None = None,
                 gpus_per_replica: Sequence[int] | None = None) -> Comparison:
    """Report on each run with ``opts`` (per-run GPU price and GPUs per replica when given as
    lists) and line them up. Raises ReportError on bad input, naming the run."""
    if len(prefixes) < 2:
        raise ReportError("compare: give at least two run prefixes")
    if labels and len(labels) != len(prefixes):
        raise ReportError(f"--label: give one per run ({len(prefixes)}), got {len(labels)}")
    names = list(labels) if labels else [os.path.basename(p.removesuffix(files.REQUESTS)) for p in prefixes]
    prices = _per_run(gpu_hourly_usd, len(prefixes), "--gpu-hourly-usd")
    gpus = _per_run(gpus_per_replica, len(prefixes), "--gpus-per-replica")
    runs = []
    for prefix, name, price, n_gpus in zip(prefixes, names, prices, gpus, strict=True):
        run_opts = replace(opts, gpu_hourly_usd=price if price is not None else opts.gpu_hourly_usd,
                           gpus_per_replica=n_gpus or opts.gpus_per_replica)
        try:
            report = build_report(prefix, run_opts)
        except ReportError as e:
            raise ReportError(f"run {name}: {e}") from None
        runs.append(Run(name, prefix, report))
    notes = []
    kinds = {r.report.level for r in runs}
    if len(kinds) > 1:
        notes.append("the runs step different things (users and arrival rate): matched load is not comparable")
    common = set.intersection(*(_judged_levels(r.report) for r in runs))
    matched = at if at is not None else (max(common) if common else None)
    if matched is None:
        notes.append("no load level was measured (with enough requests) by every run: no matched-load latencies; "
                     "give --at LEVEL or use the same steps")
    else:
        for run in runs:
            at_level = [s.data for s in run.report.overall.steps
                        if float(s.data["level"]) == float(matched) and not s.data.get("thin")]
            run.matched = at_level[-1] if at_level else None
            if run.matched is None:
                notes.append(f"run {run.label} has no step at {matched:g} with enough requests")
    return Comparison(runs=runs, options=opts, matched_level=matched, level_label=runs[0].report.level_label,
                      notes=notes)
