"""Load steps from the ``users`` column, and what each step measured. Pure (DataFrame in, dicts out).

A step is a stretch of time during which requests started at one user count. Short stretches
(under ``MIN_STEP_S`` and ``MIN_STEP_ROWS``) are the ramp between steps and are not steps.
Each step is measured over ``[start + warm-up, end)``, ``end`` being the next step's start (or,
for the last step, the last request start in it):

* latency percentiles over ok requests that *started* in the window (the load they felt);
* throughput (req/s, tok/s, goodput) over ok requests that *completed* in the window ÷ its length;
* requests / errors: requests that started in the window (cancelled ones not counted).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from llmload.report.slo import step_value
from llmload.slo import SLO

MIN_STEP_S = 1.0
MIN_STEP_ROWS = 5
FEW_REQUESTS = 30
PCTS = (50, 90, 95, 99)
LATENCY_FIELDS = ("ttft_ms", "tpot_ms", "e2e_ms", "itl_max_ms")


@dataclass
class Step:
    users: int
    start: float  # first request start of the step
    end: float
    measured_from: float
    data: dict[str, Any] = field(default_factory=dict)  # the report.json entry

    @property
    def duration(self) -> float:
        return self.end - self.measured_from


def find_steps(df: pd.DataFrame) -> tuple[list[tuple[float, float, float]], list[str]]:
    """(level, start, end) per step, in time order; plus notes on what was merged or skipped.
    The level is the ``level`` column: the user count, or the arrival rate of open-loop runs."""
    users = df["level"].to_numpy(dtype=float)
    times = df["start_time"].to_numpy(dtype=float)
    notes: list[str] = []
    if not len(users):
        return [], notes
    change = np.flatnonzero(np.diff(users) != 0) + 1
    bounds = np.concatenate([[0], change, [len(users)]])
    runs = []
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        runs.append([float(users[a]), float(times[a]), float(times[b - 1]), int(b - a)])
    # Drop ramp stretches, then merge neighbours that are the same level again.
    long_runs = [r for r in runs if (r[2] - r[1]) >= MIN_STEP_S or r[3] >= MIN_STEP_ROWS]
    skipped = len(runs) - len(long_runs)
    if skipped:
        notes.append(f"{skipped} short stretch(es) while the user count changed were treated as ramp, not steps")
    merged: list[list] = []
    for r in long_runs:
        if merged and merged[-1][0] == r[0]:
            merged[-1][2] = r[2]
            merged[-1][3] += r[3]
        else:
            merged.append(list(r))
    out = []
    for i, (u, start, last, _n) in enumerate(merged):
        end = merged[i + 1][1] if i + 1 < len(merged) else last
        out.append((u, start, end))
    return out, notes


def _pcts(values: np.ndarray) -> dict[str, float | None]:
    values = values[~np.isnan(values)]
    if not len(values):
        return {f"p{q}": None for q in PCTS} | {"mean": None}
    got = np.percentile(values, PCTS)
    return {f"p{q}": round(float(v), 3) for q, v in zip(PCTS, got, strict=True)} | {
        "mean": round(float(values.mean()), 3)}


def measure_steps(df: pd.DataFrame, warmup_s: float, slos: list[SLO]) -> tuple[list[Step], list[str]]:
    """Steps with their report entries; notes say what was skipped and why."""
    spans, notes = find_steps(df)
    start = df["start_time"].to_numpy(dtype=float)
    end_t = df["end_time"].to_numpy(dtype=float)
    ok = df["ok"].to_numpy(dtype=bool)
    status = df["status"].astype(str).to_numpy()
    cancelled = status == "cancelled"
    cols = {c: (df[c].to_numpy(dtype=float) if c in df.columns else np.full(len(df), np.nan))
            for c in (*LATENCY_FIELDS, "ttft_visible_ms", "completion_tokens", "prompt_tokens")}
    good = ok.copy()
    for slo in slos:
        f = slo.column
        if f is not None:
            good &= np.nan_to_num(cols[f], nan=np.inf) <= slo.limit
    open_loop = "arrival_rate" in df.columns and df["level"].equals(df["arrival_rate"].astype(float))
    users_col = df["users"].to_numpy(dtype=float)
    steps: list[Step] = []
    for level, s0, s1 in spans:
        m0 = s0 + warmup_s
        name = f"{level:g} req/s arrivals" if open_loop else f"{level:g} users"
        if s1 - m0 <= 0:
            notes.append(f"step of {name} lasted {s1 - s0:.1f} s, not longer than the {warmup_s:g} s "
                         "warm-up: not measured")
            continue
        in_step = (start >= s0) & (start < s1) if s1 > s0 else (start == s0)
        users = int(np.nanmax(users_col[in_step])) if in_step.any() else int(level)
        step = Step(users=users, start=s0, end=s1, measured_from=m0)
        dur = step.duration
        started = (start >= m0) & (start < s1) & ~cancelled
        done = ok & (end_t >= m0) & (end_t < s1)
        ok_started = started & ok
        by_status: dict[str, int] = {}
        for st, n in zip(*np.unique(status[started & ~ok], return_counts=True), strict=True):
            by_status[str(st)] = int(n)
        out_tok = float(np.nansum(cols["completion_tokens"][done]))
        in_tok = float(np.nansum(cols["prompt_tokens"][done]))
        entry: dict[str, Any] = {
            "level": level if open_loop else int(level),
            "users": users,
            "arrival_rate": level if open_loop else None,
            "start_time": round(s0, 3),
            "measured_from": round(m0, 3),
            "duration_s": round(dur, 3),
            "requests": int(started.sum()),
            "ok": int(ok_started.sum()),
            "errors": int((started & ~ok).sum()),
            "errors_by_status": by_status,
            "rps": round(float(done.sum()) / dur, 4),
            "output_tps": round(out_tok / dur, 3),
            "total_tps": round((out_tok + in_tok) / dur, 3),
        }
        for f in LATENCY_FIELDS:
            entry[f] = _pcts(cols[f][ok_started])
        entry["goodput_rps"] = round(float((done & good).sum()) / dur, 4)
        verdicts = {}
        finished = int(started.sum())
        for slo in slos:
            vals = cols[slo.column][ok_started] if slo.column else np.empty(0)
            v = step_value(slo, vals, entry["errors"], finished)
            verdicts[slo.metric] = {"value": None if np.isnan(v) else round(v, 4), "limit": slo.limit,
                                    "met": bool(v <= slo.limit) if not np.isnan(v) else False}
        entry["slo"] = verdicts
        entry["slo_met"] = all(v["met"] for v in verdicts.values()) if slos else None
        if entry["ok"] < FEW_REQUESTS:
            entry["note"] = f"only {entry['ok']} ok requests: percentiles are rough"
        step.data = entry
        steps.append(step)
    return steps, notes
