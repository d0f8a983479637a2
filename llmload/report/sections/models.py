"""The report's per-model breakdown of a run with ``models:`` mixes (rows with a ``model``).

Over the requests that started in a measured window of the whole run's steps (cancelled ones left
out), per model: requests and their share, ok and errors, TTFT, TPOT, ITL max and E2E p50/p95 over
the ok ones, prompt and completion tokens, and each SLO that applies to it (the unscoped ones and
its own model SLOs, :func:`llmload.metrics.slo.scope_models`; scenario-scoped ones are in their
scenario's section): its value, met or not, and the attainment, the share of the model's finished
requests that are ok and meet every latency limit on their own (goodput's rule).

**Cost** (with ``--gpu-hourly-usd``): the whole run's dollars per hour at capacity split by each
model's share of the tokens of the capacity step's measured window (:func:`split_cost`): prompt +
completion tokens, or prompt + W x completion with ``--output-cost-weight W``. A model's
``usd_per_request`` is its dollars per hour over its own ok requests per hour in that window.

Pure (DataFrame in, plain dicts and tables out); :mod:`.render` adds the table and the JSON.

Usage::

    data = models_json(report)              # {"models": {"rows": [...], "cost_rule": ...}} or {}
    for heading, header, rows in models_tables(data):
        ...
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pandas as pd

from llmload.metrics.confidence import judge
from llmload.metrics.slo import ERROR_RATE, SLO
from llmload.report.format import fmt, fmt_usd
from llmload.report.model import Report
from llmload.report.steps import model_column

LATENCIES = ("ttft_ms", "tpot_ms", "itl_max_ms", "e2e_ms")
COST_RULE = ("the run's dollars per hour at capacity, split by each model's share of the capacity step's tokens "
             "(prompt + completion; prompt + W x completion with --output-cost-weight W)")


def split_cost(usd_per_hour: float, tokens: Mapping[str, tuple[float, float]], ok_requests: Mapping[str, int],
               duration_s: float, output_cost_weight: float | None = None) -> dict[str, dict[str, float | None]]:
    """Each model's part of ``usd_per_hour``: its share of the tokens (``tokens``: model → (prompt,
    completion) over ``duration_s``), in dollars per hour, per request and per million tokens."""
    w = 1.0 if output_cost_weight is None else output_cost_weight
    units = {m: p + w * c for m, (p, c) in tokens.items()}
    total = sum(units.values())
    out: dict[str, dict[str, float | None]] = {}
    for m, u in units.items():
        share = u / total if total > 0 else None
        usd = usd_per_hour * share if share is not None else None
        per_hour = ok_requests.get(m, 0) / duration_s * 3600.0 if duration_s > 0 else 0.0
        tok_per_hour = sum(tokens[m]) / duration_s * 3600.0 if duration_s > 0 else 0.0
        out[m] = {"token_share": None if share is None else round(share, 6),
                  "usd_per_hour": None if usd is None else round(usd, 6),
                  "usd_per_request": round(usd / per_hour, 8) if usd is not None and per_hour else None,
                  "usd_per_million_tokens": round(usd / tok_per_hour * 1e6, 8) if usd is not None and tok_per_hour
                  else None}
    return out


def _measured(df: pd.DataFrame, steps: list[dict[str, Any]]) -> np.ndarray:
    start = df["start_time"].to_numpy(dtype=float)
    inside = np.zeros(len(df), dtype=bool)
    for s in steps:
        inside |= (start >= s["measured_from"]) & (start < s["end_time"])
    return inside & (df["status"].astype(str) != "cancelled").to_numpy()


def _col(df: pd.DataFrame, name: str) -> np.ndarray:
    return df[name].to_numpy(dtype=float) if name in df.columns else np.full(len(df), np.nan)


def _pcts(v: np.ndarray) -> dict[str, float | None]:
    v = v[~np.isnan(v)]
    if not len(v):
        return {"p50": None, "p95": None}
    p50, p95 = np.percentile(v, [50, 95])
    return {"p50": round(float(p50), 3), "p95": round(float(p95), 3)}


def model_slos(slos: list[SLO], model: str) -> list[SLO]:
    """Of the run's SLOs (``slos``: those that apply to the whole run), the request SLOs a model is
    judged by in this table: every one that is not another model's."""
    return [s for s in slos if not s.per_task and (s.model is None or s.model == model)]


def models_json(report: Report) -> dict[str, Any]:
    """``{"models": {...}}`` for a run with models: mixes, else ``{}``."""
    df = report.df
    models = model_column(df)
    if not any(models):
        return {}
    steps = [s.data for s in report.overall.steps]
    measured = _measured(df, steps) & (models != "")
    ok = df["ok"].to_numpy(dtype=bool)
    total = int(measured.sum())
    prompt, completion = _col(df, "prompt_tokens"), _col(df, "completion_tokens")
    one_scenario = len(report.scenarios) == 1  # then its scoped SLOs are the whole run's
    slos = [s for s in report.overall.slos if s.scenario is None or one_scenario]
    rows = []
    for m in sorted({x for x in models[measured]}):
        mine = measured & (models == m)
        good = mine & ok
        row: dict[str, Any] = {"model": m, "requests": int(mine.sum()),
                               "share": round(float(mine.sum()) / total, 4) if total else None,
                               "ok": int(good.sum()), "errors": int((mine & ~ok).sum()),
                               "prompt_tokens": int(np.nansum(prompt[good])),
                               "completion_tokens": int(np.nansum(completion[good]))}
        for c in LATENCIES:
            row[c] = _pcts(_col(df, c)[good])
        within = good.copy()
        row["slo"] = {}
        for slo in model_slos(slos, m):
            values = np.empty(0) if slo.column is None else _col(df, slo.column)[good]
            values = values[~np.isnan(values)]
            v = judge(slo, values, int((mine & ~ok).sum()), int(mine.sum()), 0.0)
            row["slo"][slo.key] = {"value": v["value"], "limit": slo.limit, "met": v["met"]}
            if slo.column is not None and slo.metric != ERROR_RATE:
                within &= np.nan_to_num(_col(df, slo.column), nan=np.inf) <= slo.limit
        row["attainment"] = round(float(within.sum()) / float(mine.sum()), 4) if row["slo"] and mine.any() else None
        rows.append(row)
    out: dict[str, Any] = {"rows": rows, "requests": total}
    cost = report.overall.cost
    cap = next((s for s in steps if s["start_time"] == report.overall.capacity.get("start_time")), None)
    if cost and cap is not None:
        start = df["start_time"].to_numpy(dtype=float)
        window = (start >= cap["measured_from"]) & (start < cap["end_time"]) & ok & (models != "")
        names = [r["model"] for r in rows]
        tokens = {m: (float(np.nansum(prompt[window & (models == m)])), float(np.nansum(completion[window & (
            models == m)]))) for m in names}
        counts = {m: int((window & (models == m)).sum()) for m in names}
        split = split_cost(cost["usd_per_hour"], tokens, counts, cap["duration_s"], report.options.output_cost_weight)
        for r in rows:
            r["cost"] = split[r["model"]]
        out["cost_rule"] = COST_RULE
    return {"models": out}


def models_tables(data: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(heading, header, rows) of the per-model table, when the run has models: mixes."""
    m = data.get("models")
    if not m:
        return []
    priced = any("cost" in r for r in m["rows"])
    header = ["model", "requests", "share", "ok", "errors", "TTFT p50/p95 (ms)", "TPOT p50/p95 (ms)",
              "ITL max p50/p95 (ms)", "prompt tok", "completion tok", "SLOs", "attainment"]
    header += ["token share", "$/hour", "$/request"] if priced else []
    rows = []
    for r in m["rows"]:
        slo_text = ", ".join(f"{k}={fmt(v['value'], 1)} {'met' if v['met'] else 'BROKEN'}"
                             for k, v in r["slo"].items()) or "–"
        line = [r["model"], str(r["requests"]), fmt(r["share"], 3), str(r["ok"]), str(r["errors"]),
                *(f"{fmt(r[c]['p50'], 1)} / {fmt(r[c]['p95'], 1)}" for c in ("ttft_ms", "tpot_ms", "itl_max_ms")),
                str(r["prompt_tokens"]), str(r["completion_tokens"]), slo_text, fmt(r["attainment"], 3)]
        if priced:
            c = r.get("cost") or {}
            line += [fmt(c.get("token_share"), 3), fmt_usd(c.get("usd_per_hour")), fmt_usd(c.get("usd_per_request"))]
        rows.append(line)
    return [("Models", header, rows)]


COMPARED = (("share", "share of requests", 3), ("ttft_ms.p95", "TTFT p95 (ms)", 1), ("tpot_ms.p95", "TPOT p95 (ms)", 1),
            ("attainment", "SLO attainment", 3), ("cost.usd_per_request", "$ per request", None))
"""What ``llmload compare`` lines up per model: (key in a models_json row, title, decimals; None: dollars)."""


def _value(row: dict[str, Any] | None, key: str) -> Any:
    v: Any = row
    for part in key.split("."):
        v = v.get(part) if isinstance(v, dict) else None
    return v


def compare_models(reports: list[tuple[str, Report]]) -> dict[str, dict[str, dict[str, Any]]]:
    """model → run label → the :data:`COMPARED` values, when every run has models: mixes (else {})."""
    per_run = {label: models_json(r).get("models") for label, r in reports}
    if not per_run or not all(per_run.values()):
        return {}
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for label, data in per_run.items():
        for row in data["rows"]:
            out.setdefault(row["model"], {})[label] = {key: _value(row, key) for key, _, _ in COMPARED}
    return dict(sorted(out.items()))


def compare_models_table(by_model: dict[str, dict[str, dict[str, Any]]],
                         labels: list[str]) -> tuple[list[str], list[list[str]]]:
    """(header, rows) of the per-model comparison: one row per model and value, one column per run."""
    rows = []
    for model, runs in by_model.items():
        for key, title, nd in COMPARED:
            cells = [runs.get(label, {}).get(key) for label in labels]
            rows.append([model, title, *[fmt_usd(v) if nd is None else fmt(v, nd) for v in cells]])
    return ["model", "", *labels], rows
