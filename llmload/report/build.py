"""Building a report from a run's rows: steps, capacity, cost, plan and prefix cache per section.

Failures count by default: every section's SLOs get the error budget ``error_rate ≤ 1 %``
(``ReportOptions.error_budget``; an unscoped ``error_rate`` SLO replaces it, None switches it off).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from llmload import files
from llmload.metrics.catalog import RTFX
from llmload.metrics.slo import ERROR_RATE, SLO, scope_models, slos_for, with_error_budget
from llmload.metrics.step_verdict import step_slos as step_slos_of
from llmload.report.capacity import cost_at, find_capacity, plan_for
from llmload.report.load import ReportError, load_requests
from llmload.report.model import DEFAULT_WARMUP_S, Report, ReportOptions, Section
from llmload.report.run_identity import read_manifest, search_warmup, search_windows
from llmload.report.sections.client_limits import flag_client_limited_steps, load_client_limits
from llmload.report.sections.gpu import GpuRun, attach_gpu_metrics, flag_gpu_steps, load_gpu_metrics
from llmload.report.sections.prefix_truth import check_intended_hits
from llmload.report.sections.replicas import ReplicaRun, flag_lost_members, load_replicas, replicas_json
from llmload.report.sections.server import attach_server_metrics
from llmload.report.steps import mark_step_endings, measure_steps, model_column


def prefix_cache_stats(df: pd.DataFrame) -> dict[str, Any] | None:
    if "cached_tokens" not in df.columns:
        return None
    ok = df.loc[df["ok"].to_numpy(), [c for c in ("cached_tokens", "ttft_ms", "prompt_tokens") if c in df.columns]]
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


def _section(name: str, df: pd.DataFrame, slos: list[SLO], opts: ReportOptions, warmup_s: float,
             notes: list[str], warnings: list[str], judged: list[SLO], scenarios: list[str], scope: str | None,
             windows: list[tuple[float, float, float]], gpus: GpuRun | None = None,
             replicas: ReplicaRun | None = None) -> Section:
    """``slos``: the section's own (shown); ``judged``: those its steps are judged by (the whole run of
    several scenarios: the unscoped ones and every scenario's scoped ones, :mod:`llmload.metrics.step_verdict`)."""
    step_slos = step_slos_of(judged, scenarios)  # task SLOs are judged over tasks (report.tasks)
    steps, step_notes, step_warnings = measure_steps(df, warmup_s, step_slos, opts.sample_floor, scenarios, scope,
                                                     windows)
    where = "" if name == "all" else f"{name}: "
    notes += [where + n for n in step_notes]
    warnings += [where + w for w in step_warnings]
    if any(s.scenario is not None and s.scenario != scope for s in step_slos):
        notes.append("the whole run's capacity holds every SLO, the scenario-scoped ones included")
    flag_gpu_steps(steps, gpus, opts.allow_throttled)  # a throttled step is never capacity
    flag_lost_members(steps, replicas)  # nor is one in which the fleet lost a replica
    capacity = find_capacity([s.data for s in steps], bool(step_slos), opts.sample_floor)
    unit = "req/s arrivals" if steps and steps[0].data["arrival_rate"] is not None else "users"
    if capacity.get("non_monotone"):
        levels = ", ".join(f"{lv:g}" for lv in capacity["non_monotone"])
        warnings.append(f"{where}non-monotone: step(s) at {levels} {unit} met every SLO above the failing step at "
                        f"{capacity['next_step_level']:g} {unit}: noise or an unstable server; rerun with "
                        "longer steps. Capacity stays below the first failing step.")
    for t in capacity.get("thin_above") or []:
        why = f"only {t['ok']} ok requests (< {opts.sample_floor})"
        if t["ok"] >= opts.sample_floor:  # thin where a scenario or a model has an SLO of its own: say which
            why = next((s.data["note"].removesuffix(": no verdict, never capacity") for s in steps
                        if s.data["level"] == t["level"] and s.data.get("thin") and s.data.get("note")), why)
        warnings.append(f"{where}the step at {t['level']:g} {unit} had {why}: no verdict, not capacity, not priced")
    cap_step = next((s.data for s in steps if s.data["start_time"] == capacity.get("start_time")), None)
    if cap_step is not None and RTFX.name in cap_step:  # transcription: the capacity step's real-time factor
        capacity[RTFX.name] = cap_step[RTFX.name]
    cost = None
    if opts.gpu_hourly_usd is not None and cap_step is not None:
        input_tps = cap_step["total_tps"] - cap_step["output_tps"]  # the capacity step's own numbers
        cost = cost_at(capacity, opts.gpu_hourly_usd, opts.gpus_per_replica, input_tps, opts.output_cost_weight,
                       cap_step.get(RTFX.name))
    plan = None
    target = opts.plan_target_rps
    if target is not None:
        plan = plan_for(capacity.get("rps"), target, opts.headroom, opts.gpus_per_replica, opts.gpu_hourly_usd)
        if opts.daily_requests is not None:
            plan["daily_requests"] = opts.daily_requests
            plan["peak_factor"] = opts.peak_factor
    return Section(name=name, slos=slos, steps=steps, capacity=capacity, cost=cost, plan=plan,
                   prefix_cache=prefix_cache_stats(df), requests=int(len(df)))


def budget_text(opts: ReportOptions) -> str:
    """How failed requests counted, in words, for the report and its JSON."""
    given = [s for s in opts.slos if s.metric == ERROR_RATE and s.scenario is None]
    if given:
        return f"error_rate ≤ {given[-1].limit:.4g} (--slo error_rate)"
    if opts.error_budget is None:
        return "off (--error-budget off): failed requests count against no SLO"
    return f"error_rate ≤ {opts.error_budget:.4g} (default; --error-budget FRACTION or off to change)"


def build_report(prefix: str | list[str], opts: ReportOptions | None = None) -> Report:
    """Load ``PREFIX_requests.csv`` and compute every section. Raises ReportError on bad input."""
    opts = opts or ReportOptions()
    opts.validate()
    loaded = load_requests(prefix, opts.run_id)
    df = loaded.df
    first = prefix if isinstance(prefix, str) else prefix[0]  # several files of one run: named after the first
    manifest, manifest_warnings = read_manifest(first, loaded.run_id)
    warmup = opts.warmup_s
    if warmup is None:
        warmup = search_warmup(manifest)
        warmup = DEFAULT_WARMUP_S if warmup is None else warmup
    notes: list[str] = [f"the first {warmup:g} s after each change of the load are warm-up and are not measured"]
    if loaded.warmup_rows:
        notes.append(f"{loaded.warmup_rows} request(s) of the run's warm-up (--warmup-seconds, phase=warmup) are left "
                     "out of every step, capacity and cost")
    scenario_names = [str(s) for s in df["scenario"].unique()]
    model_of = model_column(df)
    try:  # a scope that names a model of a models: mix judges that model's requests alone
        given = scope_models(opts.slos, scenario_names, {m for m in model_of if m})
    except ValueError as e:
        raise ReportError(str(e)) from None
    unknown = sorted({s.scenario for s in given if s.scenario and s.scenario not in scenario_names})
    warnings = list(loaded.warnings) + manifest_warnings
    if unknown:
        models_text = f"; models {', '.join(sorted({m for m in model_of if m}))}" if any(model_of) else ""
        warnings.append(f"SLO(s) for scenario(s) {', '.join(unknown)} that the run does not have: "
                        f"the run has {', '.join(scenario_names)}{models_text}")
    slos = with_error_budget(given, opts.error_budget)
    gpus = load_gpu_metrics(prefix)  # PREFIX_gpu_metrics.csv: flags throttled steps before capacity
    fleet = load_replicas(prefix)  # several --server-metrics endpoints: each replica, and lost members
    # A run of one scenario is that scenario: its scoped SLOs apply to the whole run too.
    scope = scenario_names[0] if len(scenario_names) == 1 else None
    windows = search_windows(manifest)
    if windows and opts.warmup_s is not None and opts.warmup_s != search_warmup(manifest):
        windows = []  # another warm-up asked for: the stretches' own windows, not the search's
        notes.append(f"--warmup-s {opts.warmup_s:g} is not the search's warm-up: its steps are measured over "
                     "their own stretches, not the windows the search judged")
    scenarios = {}
    if len(scenario_names) > 1:
        for name in scenario_names:
            sub = df[(df["scenario"] == name).to_numpy()]
            served = set(model_of[(df["scenario"] == name).to_numpy()])
            mine = [s for s in slos_for(slos, name) if s.model is None or s.model in served]
            scenarios[name] = _section(name, sub, mine, opts, warmup, notes, warnings, mine, scenario_names, name,
                                       windows, gpus, fleet)
    whole = slos_for(slos, scope)
    judged = whole if scope is not None else slos  # several scenarios: the scoped SLOs hold for the whole run too
    overall = _section("all", df, whole, opts, warmup, notes, warnings, judged, scenario_names, scope, windows, gpus,
                       fleet)
    if len(scenario_names) == 1:
        scenarios[scenario_names[0]] = overall
    shape = (manifest or {}).get("shape") or {}
    early = mark_step_endings(overall.steps, shape.get("step_log"))
    for sec in scenarios.values():
        if sec is not overall:
            mark_step_endings(sec.steps, shape.get("step_log"))
    if isinstance(shape.get("step_log"), list):
        pct = shape.get("step_precision_pct")
        pct_text = f"{pct:g}" if isinstance(pct, int | float) else "?"  # a hand-edited manifest
        notes.append(f"precision stop (--step-precision {pct_text} %): {early} of "
                     f"{len(shape['step_log'])} step(s) ended early, once the 95 % intervals of the SLO percentiles "
                     "were within that share of their values; the others ran to --step-seconds")
    limits = load_client_limits(prefix)  # PREFIX_llm_history.csv: steps the load generator itself limited
    unit = "req/s arrivals" if loaded.level == "arrival_rate" else "users"
    for sec in scenarios.values():
        if sec is not overall:
            flag_client_limited_steps(sec.steps, limits, unit)
    warnings += flag_client_limited_steps(overall.steps, limits, unit)
    if not overall.steps:
        warnings.append(f"no step lasted longer than the {warmup:g} s warm-up: nothing was measured "
                        "(try --warmup-s 0)")
    if "phase" in df.columns and (df["phase"] == files.TOGETHER_PHASE).any():
        notes.append("an --isolation run: each phase (each priority class alone, then together) is a step of its "
                     "own, so the capacity over them compares unlike loads: read the isolation section instead")
    if loaded.level == "arrival_rate":
        notes.append("an open-loop run: steps follow the arrival rate (arrival_rate column), not the user count")
    report = Report(source=loaded.path, options=opts, overall=overall, scenarios=scenarios, warnings=warnings,
                    notes=notes, df=df, level=loaded.level, warmup_s=warmup, error_budget=budget_text(opts),
                    run_id=loaded.run_id, manifest=manifest)
    attach_server_metrics(report, files.prefix_of(first), loaded.warmup_timing)  # PREFIX_server_metrics.csv
    report.replicas = replicas_json(overall.steps, fleet, df)
    for m in (report.replicas or {}).get("lost", []):
        warnings.append(f"the fleet lost a member: {m['endpoint']} stopped answering its metrics at "
                        f"{m['down_since']:.1f} (last answered {m['last_answered']:.1f}); {m['failed_requests']} "
                        "request(s) failed after that; the steps from then on are never capacity")
    report.warnings.extend(check_intended_hits(manifest, scenarios))  # prefix_hit_rate against cached_tokens
    attach_gpu_metrics(report, gpus)  # PREFIX_gpu_metrics.csv
    return report
