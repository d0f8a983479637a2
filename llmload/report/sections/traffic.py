"""What production-shaped workloads add to the report, per scenario, from the request rows:

* **Agent tasks** (rows with a ``step_kind``, grouped by ``session_id``): task duration (first
  call's start → last call's end), calls, prompt and completion tokens per task, outcomes, and
  each task SLO (``task_pNN_s``: its value over tasks that did not fail, and the share of all
  tasks that finished within its limit). Tasks with a cancelled call were cut off by the end of
  the test and are left out. The outcome comes from the last call: not ok → ``failed``,
  ``finish_reason`` other than ``tool_calls`` → ``answered``, else ``step_limit``.
* **Input tokens, text and image** (rows with ``requested_image_tokens``): the server-reported
  prompt tokens of ok requests split into the pictures' tokens and the rest.
* **Schedule lag** (rows with ``scheduled_time``: trace replay and open-loop arrivals):
  ``start_time − scheduled_time`` and how many requests went out more than 10 ms late.

Pure (DataFrame in, plain dicts and tables out); :mod:`.render` adds the tables and the JSON.

Usage::

    data = traffic_json(report)        # {"tasks": {...}, "input_tokens": {...}, "schedule_lag": {...}}
    for heading, header, rows in traffic_tables(data):
        ...
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from llmload.metrics.slo import SLO, slos_for
from llmload.report.format import fmt
from llmload.report.model import Report
from llmload.report.sections.sessions import graph_sessions

LATE_MS = 10.0


def _pcts(v: np.ndarray) -> dict[str, float | None]:
    if not len(v):
        return {"p50": None, "p95": None, "p99": None, "mean": None}
    p50, p95, p99 = np.percentile(v, [50, 95, 99])
    return {"p50": round(float(p50), 3), "p95": round(float(p95), 3), "p99": round(float(p99), 3),
            "mean": round(float(v.mean()), 3)}


def task_table(df: pd.DataFrame) -> pd.DataFrame:
    """One row per finished agent task: duration_s, calls, prompt/completion tokens, outcome."""
    if "step_kind" not in df.columns or "session_id" not in df.columns:
        return pd.DataFrame()
    kind = df["step_kind"]
    rows = df[(kind.notna() & (kind.astype(str) != "")).to_numpy()]  # read as categories: no fillna("")
    if rows.empty:
        return pd.DataFrame()
    rows = rows.assign(_cancel=rows["status"].astype(str) == "cancelled",
                       _fail=~rows["ok"] & (rows["status"].astype(str) != "cancelled"),
                       _turn=rows["turn"].fillna(0) if "turn" in rows else 0)
    rows = rows.sort_values(["session_id", "_turn"], kind="stable")
    g = rows.groupby(rows["session_id"].astype(str), sort=False)
    last_finish = g["finish_reason"].last().astype(object).fillna("").astype(str) if "finish_reason" in rows \
        else None
    out = pd.DataFrame({
        "start": g["start_time"].min(),
        "duration_s": g["end_time"].max() - g["start_time"].min(),
        "calls": g.size(),
        "prompt_tokens": g["prompt_tokens"].sum(min_count=1).fillna(0) if "prompt_tokens" in rows else 0,
        "completion_tokens": g["completion_tokens"].sum(min_count=1).fillna(0),
        "cancelled": g["_cancel"].any(),
        "failed": g["_fail"].any(),
    })
    out = out[~out["cancelled"]]
    answered = (last_finish.reindex(out.index) != "tool_calls") if last_finish is not None else True
    out["outcome"] = np.where(out["failed"], "failed", np.where(answered, "answered", "step_limit"))
    return out.drop(columns=["cancelled", "failed"])


def task_stats(df: pd.DataFrame, slos: list[SLO]) -> dict[str, Any] | None:
    tasks = task_table(df)
    if tasks.empty:
        return None
    n = len(tasks)
    good = tasks[tasks["outcome"] != "failed"]
    dur = good["duration_s"].to_numpy(dtype=float)
    out: dict[str, Any] = {
        "tasks": n,
        "outcomes": {o: int((tasks["outcome"] == o).sum()) for o in ("answered", "step_limit", "failed")},
        "task_s": _pcts(dur),
        "calls_per_task": round(float(tasks["calls"].mean()), 3),
        "prompt_tokens_per_task": round(float(tasks["prompt_tokens"].mean()), 1),
        "completion_tokens_per_task": round(float(tasks["completion_tokens"].mean()), 1),
        "slo": {},
    }
    for slo in slos:
        if not slo.per_task:
            continue
        q = slo.quantile
        value = None if not len(dur) else float(dur.mean() if q is None else np.percentile(dur, q))
        within = int((dur <= slo.limit).sum())
        out["slo"][slo.metric] = {"value": None if value is None else round(value, 3), "limit": slo.limit,
                                  "met": value is not None and value <= slo.limit,
                                  "share_within": round(within / n, 4)}
    return out


def input_split(df: pd.DataFrame) -> dict[str, Any] | None:
    if "requested_image_tokens" not in df.columns or not df["requested_image_tokens"].notna().any():
        return None
    ok = df[df["ok"]]
    prompt = float(np.nansum(ok["prompt_tokens"].to_numpy(dtype=float))) if "prompt_tokens" in ok else 0.0
    image = float(np.nansum(ok["requested_image_tokens"].to_numpy(dtype=float)))
    n = max(len(ok), 1)
    return {"requests": int(len(ok)), "prompt_tokens": int(prompt), "image_tokens": int(image),
            "text_tokens": int(prompt - image), "image_share": round(image / prompt, 4) if prompt else None,
            "image_tokens_per_request": round(image / n, 1), "text_tokens_per_request": round((prompt - image) / n, 1)}


def schedule_lag(df: pd.DataFrame) -> dict[str, Any] | None:
    if "scheduled_time" not in df.columns:
        return None
    rows = df[df["scheduled_time"].notna()]
    if rows.empty:
        return None
    lag = np.maximum((rows["start_time"] - rows["scheduled_time"]).to_numpy(dtype=float), 0.0) * 1000.0
    return {"requests": int(len(lag)), "lag_ms": {**_pcts(lag), "max": round(float(lag.max()), 3)},
            "late": int((lag > LATE_MS).sum())}


def traffic_json(report: Report) -> dict[str, Any]:
    """Per scenario: tasks, input split and schedule lag, where the run has them (keys left out otherwise)."""
    df = report.df
    out: dict[str, dict[str, Any]] = {"tasks": {}, "sessions": {}, "input_tokens": {}, "schedule_lag": {}}
    names = [str(s) for s in df["scenario"].unique()]
    for name in names:
        sub = df[(df["scenario"] == name).to_numpy()]
        for key, value in (("tasks", task_stats(sub, slos_for(report.options.slos, name))),
                           ("sessions", graph_sessions(sub)),
                           ("input_tokens", input_split(sub)), ("schedule_lag", schedule_lag(sub))):
            if value is not None:
                out[key][name] = value
    return {k: v for k, v in out.items() if v}


def traffic_tables(data: dict[str, Any]) -> list[tuple[str, list[str], list[list[str]]]]:
    """(heading, header, rows) for each part of :func:`traffic_json` the run has."""
    tables = []
    if data.get("tasks"):
        rows = []
        for name, t in data["tasks"].items():
            o, d = t["outcomes"], t["task_s"]
            slo = "; ".join(f"{m}={v['limit']:g}: {fmt(v['value'], 2)} s, {v['share_within']:.1%} within, "
                            f"{'met' if v['met'] else 'broken'}" for m, v in t["slo"].items()) or "–"
            rows.append([name, str(t["tasks"]), f"{o['answered']} / {o['step_limit']} / {o['failed']}",
                         f"{fmt(d['p50'], 2)} / {fmt(d['p95'], 2)} / {fmt(d['p99'], 2)}", fmt(t["calls_per_task"], 2),
                         f"{t['prompt_tokens_per_task']:,.0f} / {t['completion_tokens_per_task']:,.0f}", slo])
        tables.append(("Agent tasks", ["scenario", "tasks", "answered / step limit / failed",
                                       "task time p50/p95/p99 (s)", "calls per task",
                                       "prompt / completion tokens per task", "task SLO"], rows))
    if data.get("sessions"):
        rows = []
        for name, g in data["sessions"].items():
            m, t = g["makespan_s"], g["ttft_ms"]
            rows.append([name, str(g["sessions"]), f"{fmt(m['p50'], 2)} / {fmt(m['p95'], 2)}",
                         f"{g['critical_path_model_share']:.0%} ({fmt(g['critical_path_calls'], 1)} calls)",
                         fmt(g["calls_per_session"], 1),
                         "–" if g["cached_share"] is None else f"{g['cached_share']:.0%}",
                         " / ".join("–" if t[k] is None else fmt(t[k]["p50"], 1) for k in ("cached", "uncached"))])
        tables.append(("Call-graph sessions", ["scenario", "sessions", "makespan p50/p95 (s)",
                                               "critical path: model share (calls)", "calls per session",
                                               "prompt tokens cached", "TTFT p50 cached / uncached (ms)"], rows))
    if data.get("input_tokens"):
        rows = [[name, f"{d['prompt_tokens']:,}", f"{d['text_tokens']:,}", f"{d['image_tokens']:,}",
                 f"{d['image_share']:.1%}" if d["image_share"] is not None else "–",
                 f"{d['text_tokens_per_request']:,.1f} / {d['image_tokens_per_request']:,.1f}"]
                for name, d in data["input_tokens"].items()]
        tables.append(("Input tokens: text and image", ["scenario", "prompt tokens (ok requests)", "text", "image",
                                                         "image share", "text / image per request"], rows))
    if data.get("schedule_lag"):
        rows = [[name, str(d["requests"]), f"{fmt(d['lag_ms']['p50'], 2)} / {fmt(d['lag_ms']['p99'], 2)} / "
                 f"{fmt(d['lag_ms']['max'], 1)}", str(d["late"])] for name, d in data["schedule_lag"].items()]
        tables.append(("Schedule lag (trace replay, open-loop arrivals)",
                       ["scenario", "scheduled requests", "send lag p50/p99/max (ms)",
                        f"sent > {LATE_MS:g} ms late"], rows))
    return tables
