"""From a run's CSVs to a capacity plan: steps, SLO capacity, cost, replicas. No Locust import.

Usage::

    from llmload.report import ReportOptions, build_report, write_report
    report = build_report("runs/rag", ReportOptions(slos=[parse_slo("ttft_p95_ms=2000")], gpu_hourly_usd=4.5))
    paths = write_report(report, "runs/")     # report.md, report.html, report.json, vllm_bench_serve.json
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from llmload.report.capacity import cost_at, find_capacity, plan_for
from llmload.report.load import ReportError, load_requests
from llmload.report.slo import SLO, parse_slo, slos_for
from llmload.report.steps import Step, measure_steps

__all__ = ["ReportError", "ReportOptions", "build_report", "parse_slo", "write_report"]

DEFAULT_WARMUP_S = 5.0


@dataclass
class ReportOptions:
    slos: list[SLO] = field(default_factory=list)
    warmup_s: float = DEFAULT_WARMUP_S
    gpu_hourly_usd: float | None = None
    gpus_per_replica: int = 1
    target_rps: float | None = None
    daily_requests: float | None = None
    peak_factor: float = 1.0
    headroom: float = 0.3
    output_cost_weight: float | None = None

    def validate(self) -> None:
        if self.warmup_s < 0:
            raise ReportError(f"--warmup-s {self.warmup_s}: expected seconds >= 0")
        if self.gpu_hourly_usd is not None and self.gpu_hourly_usd < 0:
            raise ReportError(f"--gpu-hourly-usd {self.gpu_hourly_usd}: expected a price >= 0")
        if self.gpus_per_replica < 1:
            raise ReportError(f"--gpus-per-replica {self.gpus_per_replica}: expected a whole number >= 1")
        if self.target_rps is not None and self.daily_requests is not None:
            raise ReportError("give either --target-rps or --daily-requests (with --peak-factor), not both")
        if self.target_rps is not None and self.target_rps <= 0:
            raise ReportError(f"--target-rps {self.target_rps}: expected requests/s > 0")
        if self.daily_requests is not None and self.daily_requests <= 0:
            raise ReportError(f"--daily-requests {self.daily_requests}: expected a count > 0")
        if self.peak_factor < 1:
            raise ReportError(f"--peak-factor {self.peak_factor}: expected >= 1 (peak rate ÷ average rate)")
        if not 0 <= self.headroom < 1:
            raise ReportError(f"--headroom {self.headroom}: expected a fraction in [0, 1), e.g. 0.3")

    @property
    def plan_target_rps(self) -> float | None:
        if self.target_rps is not None:
            return self.target_rps
        if self.daily_requests is not None:
            return self.daily_requests * self.peak_factor / 86_400.0
        return None


@dataclass
class Section:
    """Steps, capacity, cost and plan for one scenario or for the whole run."""

    name: str
    slos: list[SLO]
    steps: list[Step]
    capacity: dict[str, Any]
    cost: dict[str, Any] | None
    plan: dict[str, Any] | None
    prefix_cache: dict[str, Any] | None
    requests: int

    def to_json(self) -> dict[str, Any]:
        return {
            "slos": [s.text() for s in self.slos],
            "requests": self.requests,
            "steps": [s.data for s in self.steps],
            "capacity": self.capacity,
            "cost": self.cost,
            "plan": self.plan,
            "prefix_cache": self.prefix_cache,
        }


@dataclass
class Report:
    source: str
    options: ReportOptions
    overall: Section
    scenarios: dict[str, Section]
    warnings: list[str]
    notes: list[str]
    df: pd.DataFrame
    level: str = "users"  # or "arrival_rate": what the steps are

    @property
    def level_label(self) -> str:
        return "arrival rate (req/s)" if self.level == "arrival_rate" else "users"

    def to_json(self) -> dict[str, Any]:
        o = self.overall.to_json()
        return {
            "source": self.source,
            "warmup_s": self.options.warmup_s,
            "steps_by": self.level,
            "slos": [s.text() for s in self.options.slos],
            "steps": o["steps"],
            "capacity": o["capacity"],
            "cost": o["cost"],
            "plan": o["plan"],
            "prefix_cache": o["prefix_cache"],
            "scenarios": {name: s.to_json() for name, s in self.scenarios.items()},
            "warnings": self.warnings,
            "notes": self.notes,
        }


def prefix_cache_stats(df: pd.DataFrame) -> dict[str, Any] | None:
    if "cached_tokens" not in df.columns:
        return None
    ok = df[df["ok"]]
    cached = ok["cached_tokens"]
    if not cached.notna().any():
        return None
    hit = (cached.fillna(0) > 0).to_numpy()
    ttft = ok["ttft_ms"].to_numpy(dtype=float)

    def pct(mask: np.ndarray) -> dict[str, float | None]:
        v = ttft[mask]
        v = v[~np.isnan(v)]
        if not len(v):
            return {"requests": 0, "p50": None, "p95": None}
        p50, p95 = np.percentile(v, [50, 95])
        return {"requests": int(len(v)), "p50": round(float(p50), 3), "p95": round(float(p95), 3)}

    prompt = float(np.nansum(ok["prompt_tokens"].to_numpy(dtype=float))) if "prompt_tokens" in ok else 0.0
    return {
        "hit_ratio_tokens": round(float(np.nansum(cached.to_numpy(dtype=float))) / prompt, 4) if prompt else None,
        "requests_with_hits": round(float(hit.mean()), 4) if len(hit) else None,
        "ttft_ms_hit": pct(hit),
        "ttft_ms_miss": pct(~hit),
    }


def _section(name: str, df: pd.DataFrame, slos: list[SLO], opts: ReportOptions,
             notes: list[str]) -> Section:
    steps, step_notes = measure_steps(df, opts.warmup_s, slos)
    notes += [f"{name}: {n}" for n in step_notes]
    capacity = find_capacity([s.data for s in steps], bool(slos))
    cost = None
    if opts.gpu_hourly_usd is not None and capacity.get("users") is not None:
        cap_step = next(s for s in steps if s.data["level"] == capacity["level"])
        input_tps = cap_step.data["total_tps"] - cap_step.data["output_tps"]
        cost = cost_at(capacity, opts.gpu_hourly_usd, opts.gpus_per_replica, input_tps, opts.output_cost_weight)
    plan = None
    target = opts.plan_target_rps
    if target is not None:
        plan = plan_for(capacity.get("rps"), target, opts.headroom, opts.gpus_per_replica, opts.gpu_hourly_usd)
        if opts.daily_requests is not None:
            plan["daily_requests"] = opts.daily_requests
            plan["peak_factor"] = opts.peak_factor
    return Section(name=name, slos=slos, steps=steps, capacity=capacity, cost=cost, plan=plan,
                   prefix_cache=prefix_cache_stats(df), requests=int(len(df)))


def build_report(prefix: str, opts: ReportOptions | None = None) -> Report:
    """Load ``PREFIX_requests.csv`` and compute every section. Raises ReportError on bad input."""
    opts = opts or ReportOptions()
    opts.validate()
    loaded = load_requests(prefix)
    df = loaded.df
    notes: list[str] = [f"the first {opts.warmup_s:g} s after each change of the user count are warm-up and "
                        "are not measured"]
    scenario_names = [str(s) for s in df["scenario"].astype(str).unique()]
    unknown = sorted({s.scenario for s in opts.slos if s.scenario and s.scenario not in scenario_names})
    warnings = list(loaded.warnings)
    if unknown:
        warnings.append(f"SLO(s) for scenario(s) {', '.join(unknown)} that the run does not have: "
                        f"the run has {', '.join(scenario_names)}")
    # A run of one scenario is that scenario: its scoped SLOs apply to the whole run too.
    scope = scenario_names[0] if len(scenario_names) == 1 else None
    overall = _section("all", df, slos_for(opts.slos, scope), opts, notes)
    scenarios = {}
    if len(scenario_names) > 1:
        for name in scenario_names:
            sub = df[df["scenario"].astype(str) == name]
            scenarios[name] = _section(name, sub, slos_for(opts.slos, name), opts, notes)
    elif scenario_names:
        scenarios[scenario_names[0]] = overall
    if not overall.steps:
        warnings.append("no step lasted longer than the warm-up: nothing was measured (try --warmup-s 0)")
    if loaded.level == "arrival_rate":
        notes.append("an open-loop run: steps follow the arrival rate (arrival_rate column), not the user count")
    return Report(source=loaded.path, options=opts, overall=overall, scenarios=scenarios, warnings=warnings,
                  notes=notes, df=df, level=loaded.level)


def write_report(report: Report, out_dir: str) -> list[str]:
    from llmload.report.render import write_all

    return write_all(report, out_dir)


def fmt_usd(v: float | None) -> str:
    """Money with enough decimals to show three significant digits of small amounts."""
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if v == 0 or abs(v) >= 1:
        return f"{v:,.2f}"
    decimals = max(2, 2 - math.floor(math.log10(abs(v))))
    return f"{v:.{decimals}f}"


def fmt(v: Any, nd: int = 2) -> str:
    if v is None or (isinstance(v, float) and math.isnan(v)):
        return "–"
    if isinstance(v, float):
        return f"{v:,.{nd}f}"
    return str(v)
