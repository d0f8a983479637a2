"""What each priority class got (``priority:`` in the scenario; the rows' ``priority`` column): its
SLO attainment and shed rate, and in an ``--isolation`` run each class alone vs together (the leakage).

Which rows a class is judged on: an ``--isolation`` run's ``together`` phase (every class at once,
after the report's warm-up from the phase's first request), else the measured windows of the whole
run's steps (each step after its warm-up). The warm-up's rows are never read (:mod:`.load` drops them).

Which SLOs a class is held to: a class is a property of its scenarios (workloads), so an SLO scoped
to a scenario (``interactive:ttft_p95_ms=500``) judges that scenario's requests of the class, and an
unscoped one the requests of every scenario of the class that has no scoped SLO of the same metric
(:func:`llmload.metrics.slo.slos_for`); a model SLO (``adapter-a:ttft_p95_ms=800``, a scope naming a
model of a ``models:`` mix: :func:`llmload.metrics.slo.scope_models`, as the report's steps read it)
judges the class's requests of that model alone, in every class that has some. Per SLO:
``attainment`` (:data:`~llmload.metrics.catalog.SLO_ATTAINMENT`), ``value`` (the SLO's statistic over
the ok requests) and ``met`` (value within the limit).

The isolation section compares, per class, the p95 TTFT and TPOT of its ``alone:CLASS`` phase with
those of ``together`` (:func:`leakage`): the most urgent class's leakage (its rank in
PREFIX_run.json, else the first by name) is the headline.

Usage::

    data = classes_json(report)          # {"priority_classes": {...}, "isolation": {...}} (keys the run has)
    leakage(120.0, 150.0)                 # {"ms": 30.0, "pct": 25.0}
    tables = classes_tables(data)         # [(heading, header, rows), ...] for the report's pages
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from llmload.files import ALONE_PHASE_PREFIX, TOGETHER_PHASE
from llmload.metrics import catalog
from llmload.metrics.slo import ERROR_RATE, SLO, scope_models, slos_for, with_error_budget
from llmload.report.format import fmt

_STAT = catalog.ISOLATION_STAT
_Q = float(_STAT[1:])


def leakage(alone_ms: float | None, together_ms: float | None) -> dict[str, float | None]:
    """How far a p95 moved from alone to together: ``ms`` (together - alone) and ``pct`` (of alone)."""
    if alone_ms is None or together_ms is None:
        return {"ms": None, "pct": None}
    moved = together_ms - alone_ms
    return {"ms": round(moved, 3), "pct": round(100.0 * moved / alone_ms, 2) if alone_ms > 0 else None}


def _stat(values: np.ndarray, slo: SLO) -> float | None:
    values = values[~np.isnan(values)]
    if not len(values):
        return None
    q = slo.quantile
    return float(values.mean() if q is None else np.percentile(values, q))


def _is(df: pd.DataFrame, column: str, value: str) -> np.ndarray:
    """Rows whose ``column`` is ``value`` (compared as categories: no string per row of a 10 M-row frame)."""
    if column not in df.columns:
        return np.zeros(len(df), dtype=bool)
    return (df[column] == value).to_numpy(dtype=bool)


def _column(df: pd.DataFrame, column: str) -> np.ndarray:
    """A numeric column as floats (all NaN when the file has no such column)."""
    return df[column].to_numpy(dtype=float) if column in df.columns else np.full(len(df), np.nan)


def _values(df: pd.DataFrame, column: str) -> list[str]:
    """The distinct non-empty values of a column, in order of appearance."""
    if column not in df.columns:
        return []
    return [str(v) for v in pd.unique(df[column].dropna()) if str(v)]


def _judged_rows(report: Any) -> tuple[pd.DataFrame, str]:
    """The rows classes are judged on, and in words which."""
    df = report.df
    start = df["start_time"].to_numpy(dtype=float)
    together = _is(df, "phase", TOGETHER_PHASE)
    if together.any():
        first = float(start[together].min())
        return (df[together & (start >= first + report.warmup_s)],
                f"the {TOGETHER_PHASE} phase after its {report.warmup_s:g}-s warm-up")
    mask = np.zeros(len(df), dtype=bool)
    for step in report.overall.steps:
        mask |= (start >= step.measured_from) & (start < step.end)
    return df[mask], "the measured windows of the run's steps"


def _class_entry(rows: pd.DataFrame, slos: list[SLO]) -> dict[str, Any]:
    finished = ~_is(rows, "status", "cancelled")
    ok = rows["ok"].to_numpy(dtype=bool) & finished
    shed = finished & np.isin(_column(rows, "http_status"), catalog.SHED_HTTP_STATUSES)
    n = int(finished.sum())
    entry: dict[str, Any] = {
        "scenarios": sorted(_values(rows, "scenario")),
        "requests": n, "ok": int(ok.sum()), "shed": int(shed.sum()),
        catalog.SHED_RATE.name: round(float(shed.sum()) / n, 4) if n else None,
        "error_rate": round(float(n - ok.sum()) / n, 4) if n else None,
    }
    for m in catalog.ISOLATION_METRICS:
        v = _column(rows, m.row_column)[ok]
        v = v[~np.isnan(v)]
        entry[m.row_column] = {q: round(float(np.percentile(v, float(q[1:]))), 3) if len(v) else None
                               for q in ("p50", "p95", "p99")} | {"n": int(len(v))}
    judged: dict[str, Any] = {}
    for slo in _class_slos(slos, entry["scenarios"], set(_values(rows, "model"))):
        if slo.model is not None:  # that model's requests of the class alone (as a step's verdict reads them)
            mine = finished & _is(rows, "model", slo.model)
        else:
            mine = finished & rows["scenario"].isin(_scenarios_of(slo, slos, entry["scenarios"])).to_numpy(dtype=bool)
        total = int(mine.sum())
        if slo.metric == ERROR_RATE:
            value = float(total - (ok & mine).sum()) / total if total else None
            judged[slo.text()] = {"limit": slo.limit, "value": None if value is None else round(value, 4),
                                  "met": slo.met(value), "n": total, catalog.SLO_ATTAINMENT.name: None}
            continue
        if slo.column is None or slo.column not in rows.columns:
            continue  # task SLOs are judged over tasks (report.traffic), not rows
        col = rows[slo.column].to_numpy(dtype=float)
        within = ok & mine & (np.nan_to_num(col, nan=np.inf) <= slo.limit)
        value = _stat(col[ok & mine], slo)
        judged[slo.text()] = {"limit": slo.limit, "value": None if value is None else round(value, 3),
                              "met": slo.met(value), "n": int((ok & mine).sum()),
                              catalog.SLO_ATTAINMENT.name: round(float(within.sum()) / total, 4) if total else None}
    entry["slos"] = judged
    entry["slo_met"] = all(v["met"] for v in judged.values()) if judged else None
    return entry


def _class_slos(slos: list[SLO], scenarios: list[str], models: set[str]) -> list[SLO]:
    """Every SLO that applies to at least one scenario of the class, once; a model SLO only if the
    class has requests of that model (``models``)."""
    out: list[SLO] = []
    for name in scenarios:
        out += [s for s in slos_for(slos, name) if s not in out and (s.model is None or s.model in models)]
    return out


def _scenarios_of(slo: SLO, slos: list[SLO], scenarios: list[str]) -> list[str]:
    """The class's scenarios ``slo`` judges: its own scenario, or those where no scoped SLO replaces it."""
    return [name for name in scenarios if slo in slos_for(slos, name)]


def _order(report: Any, names: list[str]) -> list[str]:
    """Classes most urgent first: the isolation run's ranks (PREFIX_run.json), else by name."""
    shape = ((report.manifest or {}).get("shape") or {}).get("isolation") or {}
    ranked = [c.get("class") for c in shape.get("classes") or [] if isinstance(c, dict)]
    known = [c for c in ranked if c in names]
    return known + sorted(n for n in names if n not in known)


def _isolation(report: Any, order: list[str]) -> dict[str, Any] | None:
    df = report.df
    phases = _values(df, "phase")
    if TOGETHER_PHASE not in phases or not any(p.startswith(ALONE_PHASE_PREFIX) for p in phases):
        return None
    start = df["start_time"].to_numpy(dtype=float)
    ok = df["ok"].to_numpy(dtype=bool)
    cancelled = _is(df, "status", "cancelled")  # cut off by the end of its phase: not counted
    per_class: dict[str, Any] = {}
    for name in order:
        entry: dict[str, Any] = {}
        for key, label in (("alone", ALONE_PHASE_PREFIX + name), ("together", TOGETHER_PHASE)):
            in_phase = _is(df, "phase", label)
            if not in_phase.any():
                entry[key] = None
                continue
            after_warmup = start >= float(start[in_phase].min()) + report.warmup_s  # from the phase's first request
            measured = in_phase & after_warmup & _is(df, "priority", name) & ~cancelled
            entry[key] = {"requests": int(measured.sum()), "samples": {}}
            for m in catalog.ISOLATION_METRICS:
                v = _column(df, m.row_column)[measured & ok]
                v = v[~np.isnan(v)]
                entry[key][m.key(_STAT)] = round(float(np.percentile(v, _Q)), 3) if len(v) else None
                entry[key]["samples"][m.name] = int(len(v))
        entry[catalog.LEAKAGE.name] = {
            m.key(_STAT): leakage(*((entry[k] or {}).get(m.key(_STAT)) for k in ("alone", "together")))
            for m in catalog.ISOLATION_METRICS}
        per_class[name] = entry
    head = order[0] if order else None
    return {"classes": order, "most_urgent": head, "warmup_s": report.warmup_s, "per_class": per_class,
            catalog.LEAKAGE.name: per_class[head][catalog.LEAKAGE.name] if head else None}


def classes_json(report: Any) -> dict[str, Any]:
    """``priority_classes`` (per class: attainment, shed rate, p95s) and ``isolation`` (an --isolation
    run's alone vs together), where the run has them (keys left out otherwise)."""
    names = _values(report.df, "priority")
    if not names:
        return {}
    order = _order(report, names)
    df = report.df
    # the SLOs as the report's steps judge them: a scope naming a model of a models: mix is a model SLO
    scoped = scope_models(report.options.slos, _values(df, "scenario"), _values(df, "model"))
    slos = with_error_budget(scoped, report.options.error_budget)
    rows, which = _judged_rows(report)
    out: dict[str, Any] = {"priority_classes": {
        "judged_on": which,
        "classes": {name: _class_entry(rows[_is(rows, "priority", name)], slos) for name in order}}}
    iso = _isolation(report, order)
    if iso is not None:
        out["isolation"] = iso
    return out


def _metric_of(slo_text: str) -> str:
    """``batch:error_rate=0.01`` → ``error_rate``."""
    return slo_text.split("=", 1)[0].rsplit(":", 1)[-1]


def _pct(v: float | None) -> str:
    return "–" if v is None else f"{v:.1%}"


def classes_tables(data: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(heading, header, rows) of the per-class table and the isolation table, where the data has them."""
    tables = []
    pc = data.get("priority_classes")
    if pc:
        rows = []
        for name, c in pc["classes"].items():
            slo = "; ".join(f"{k}: {fmt(v['value'], 4 if _metric_of(k) == ERROR_RATE else 1)} "
                            f"({'met' if v['met'] else 'broken'}"
                            + (f", {_pct(v[catalog.SLO_ATTAINMENT.name])} within" if v[catalog.SLO_ATTAINMENT.name]
                               is not None else "") + ")" for k, v in c["slos"].items()) or "–"
            verdict = "–" if c["slo_met"] is None else "met" if c["slo_met"] else "broken"
            rows.append([name, ", ".join(c["scenarios"]), str(c["requests"]), _pct(c[catalog.SHED_RATE.name]),
                         fmt(c["ttft_ms"]["p95"], 1), fmt(c["tpot_ms"]["p95"], 2), slo, verdict])
        tables.append((f"Priority classes (judged on {pc['judged_on']})",
                       ["class", "scenarios", "requests", catalog.SHED_RATE.label, "TTFT p95", "TPOT p95",
                        f"SLOs: value ({catalog.SLO_ATTAINMENT.label})", "verdict"], rows))
    iso = data.get("isolation")
    if iso:
        rows = []
        for name, c in iso["per_class"].items():
            for m in catalog.ISOLATION_METRICS:
                key = m.key(_STAT)
                leak = c[catalog.LEAKAGE.name][key]
                rows.append([name + (" (most urgent)" if name == iso["most_urgent"] else ""), m.title(_STAT),
                             fmt((c["alone"] or {}).get(key), 2), fmt((c["together"] or {}).get(key), 2),
                             fmt(leak["ms"], 2), "–" if leak["pct"] is None else f"{leak['pct']:+.1f} %"])
        tables.append(("Isolation: each class alone vs together",
                       ["class", "metric", "alone (ms)", "together (ms)", "leakage (ms)", "leakage (%)"], rows))
    return tables


def classes_summary(data: dict[str, Any]) -> list[str]:
    """The terminal's lines: each class's verdict and shed rate, and the most urgent class's leakage."""
    lines = []
    for name, c in ((data.get("priority_classes") or {}).get("classes") or {}).items():
        verdict = "no SLO" if c["slo_met"] is None else "SLOs met" if c["slo_met"] else "SLOs broken"
        lines.append(f"class {name}: {verdict}, {catalog.SHED_RATE.label} {_pct(c[catalog.SHED_RATE.name])}, "
                     f"TTFT p95 {fmt(c['ttft_ms']['p95'], 1)} ms")
    iso = data.get("isolation")
    if iso and iso["most_urgent"]:
        moved = []
        for m in catalog.ISOLATION_METRICS:
            leak = iso[catalog.LEAKAGE.name][m.key(_STAT)]
            pct = "" if leak["pct"] is None else f" ({leak['pct']:+.1f} %)"
            moved.append(f"{m.title(_STAT)} {fmt(leak['ms'], 1)} ms{pct}")
        lines.append(f"isolation: {iso['most_urgent']}'s {catalog.LEAKAGE.label} (together - alone): "
                     + ", ".join(moved))
    return lines
