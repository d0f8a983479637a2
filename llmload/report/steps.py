"""Load steps from the ``level`` column, and what each step measured. Pure (DataFrame in, dicts out).

A *stretch* is a run of consecutive requests (by start time) that started at one level (the
user count, or the arrival rate of open-loop runs) and in one phase (``--isolation``'s
``alone:CLASS`` and ``together``). Short stretches (under ``MIN_STEP_S`` and
``MIN_STEP_ROWS``) are the ramp between steps and are not steps; every other stretch is a step,
at the level it ran at. A step ends at the first request of the next stretch, whatever that
stretch's level (ramp included), or, for the last one, at its last request's start. Each step
is measured over ``[start + warm-up, end)``:

* latency percentiles (with their sample count ``n`` and 95 % interval) over ok requests that
  *started* in the window (the load they felt);
* throughput (req/s, tok/s, goodput) edge-corrected: each ok request counts once, spread evenly
  over its lifetime, so the window gets the share of it that falls inside. A short window then
  agrees with Little's law (req/s = requests in flight ÷ mean E2E) instead of catching a whole
  cohort's completions at once;
* requests / ok / errors: requests that started in the window (cancelled ones not counted).

The SLO verdict is :func:`llmload.metrics.step_verdict.judge_step`, the one the capacity search
and the SLO stop call too, on the same window. A run of the search shape says in
``PREFIX_run.json`` where it opened and closed each step's window (``measured_from``,
``judged_until``): such a step is measured over exactly that window (a confirmation at the same
level is a step of its own), so the report judges the rows the search judged.

A step with no verdict (fewer than ``sample_floor`` ok requests, or a scenario with a scoped SLO
has fewer) is *thin*: it is never capacity and is never priced. A step measured for less than
3 × its mean E2E is *short*: its throughput is rough, and the notes say how long it should have been.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from llmload.metrics import catalog
from llmload.metrics.confidence import quantile_ci
from llmload.metrics.intervals import mean_ci
from llmload.metrics.slo import SLO
from llmload.metrics.step_verdict import SAMPLE_FLOOR, WindowRows, judge_step

MIN_STEP_S = 1.0
MIN_STEP_ROWS = 5
SHORT_STEP_E2E = 3.0  # a step's window should last at least this many mean E2Es
RATE_BATCHES = 10  # the req/s interval: batch means over this many equal parts of the window
T95_9 = 2.262  # Student's t, 97.5 % quantile, 9 degrees of freedom: RATE_BATCHES − 1
PCTS = catalog.REPORT_PERCENTILES
LATENCY_FIELDS = tuple(m.row_column for m in catalog.ROW_METRICS)  # a report.json entry per field and step


@dataclass
class Step:
    users: int
    start: float  # first request start of the step
    end: float
    measured_from: float
    data: dict[str, Any] = field(default_factory=dict)  # the report.json entry; others may add keys

    @property
    def duration(self) -> float:
        return self.end - self.measured_from


def find_steps(df: pd.DataFrame) -> tuple[list[tuple[float, float, float]], list[str]]:
    """(level, start, end) per step, in time order; plus notes on what was treated as ramp."""
    levels = df["level"].to_numpy(dtype=float)
    times = df["start_time"].to_numpy(dtype=float)
    notes: list[str] = []
    if not len(levels):
        return [], notes
    moved = np.diff(levels) != 0
    if "phase" in df.columns:  # an --isolation run: a phase is a step of its own, even at the same level
        moved |= np.diff(df["phase"].astype("category").cat.codes.to_numpy()) != 0
    change = np.flatnonzero(moved) + 1
    firsts = np.concatenate([[0], change])
    lasts = np.concatenate([change, [len(levels)]]) - 1
    out = []
    skipped = 0
    for i, (a, b) in enumerate(zip(firsts, lasts, strict=True)):
        if times[b] - times[a] < MIN_STEP_S and b - a + 1 < MIN_STEP_ROWS:
            skipped += 1
            continue
        end = times[firsts[i + 1]] if i + 1 < len(firsts) else times[b]
        out.append((float(levels[a]), float(times[a]), float(end)))
    if skipped:
        notes.append(f"{skipped} short stretch(es) while the load changed were treated as ramp, not steps")
    return out, notes


def judged_spans(spans: list[tuple[float, float, float]], windows: list[tuple[float, float, float]],
                 warmup_s: float) -> list[tuple[float, float, float, float]]:
    """(level, start, measured_from, end) per step: a stretch's own ``[start + warm-up, end)``, or,
    where the run recorded judged windows (level, measured_from, until) inside it, one step per window."""
    out = []
    for level, s0, s1 in spans:
        # A window overlapping the stretch (its first rows may have been a ramp stretch of their own)
        mine = sorted(w for w in windows if abs(w[0] - level) < 1e-9 and w[1] < s1 and w[2] > s0)
        if not mine:
            out.append((level, s0, s0 + warmup_s, s1))
            continue
        start = s0
        for _, m0, until in mine:
            out.append((level, start, max(m0, s0), min(until, s1)))
            start = min(until, s1)
    return out


def _pcts(values: np.ndarray) -> dict[str, Any]:
    if not len(values):
        return {f"p{q}": None for q in PCTS} | {"mean": None, "n": 0, "ci95": {f"p{q}": [None, None] for q in PCTS}}
    values = np.sort(values)  # once: the percentiles and their intervals are then order statistics
    got = np.percentile(values, PCTS)
    out: dict[str, Any] = {f"p{q}": round(float(v), 3) for q, v in zip(PCTS, got, strict=True)}
    out["mean"] = round(float(values.mean()), 3)
    out["n"] = int(len(values))
    out["ci95"] = {f"p{q}": [None if x is None else round(x, 3) for x in quantile_ci(values, q, presorted=True)]
                     for q in PCTS}
    return out


def _share_inside(start: np.ndarray, end: np.ndarray, w0: float, w1: float) -> np.ndarray:
    """Each request's share of its lifetime inside [w0, w1) (a zero-length one: 1 if it ends inside)."""
    life = end - start
    inside = np.clip(np.minimum(end, w1) - np.maximum(start, w0), 0.0, None)
    point = ((end >= w0) & (end < w1)).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(life > 0, inside / np.where(life > 0, life, 1.0), point)


def rate_ci(start: np.ndarray, end: np.ndarray, w0: float, w1: float) -> list[float | None]:
    """95 % interval of the step's req/s (``start``/``end``: its ok requests that may overlap the
    window): batch means, the window cut into RATE_BATCHES equal parts, each part's rate counted as
    the step's is (each request spread over its lifetime), then mean ± t·s/√B. The parts' rates are
    correlated when a request lasts longer than a part, so the interval is a floor, not a bound."""
    edges = np.linspace(w0, w1, RATE_BATCHES + 1)
    width = (w1 - w0) / RATE_BATCHES
    if width <= 0 or not len(start):
        return [None, None]
    rates = np.array([float(_share_inside(start, end, a, b).sum()) / width
                      for a, b in zip(edges[:-1], edges[1:], strict=True)])
    lo, hi = mean_ci(rates, z=T95_9)
    return [None if lo is None else round(max(lo, 0.0), 4), None if hi is None else round(hi, 4)]


def model_column(df: pd.DataFrame) -> np.ndarray:
    """The rows' ``model`` as str ("" where the request named none: no models: mix)."""
    if "model" not in df.columns:
        return np.full(len(df), "", dtype=object)
    col = df["model"]
    return col.astype(object).where(col.notna(), "").astype(str).to_numpy(dtype=object)


def measure_steps(df: pd.DataFrame, warmup_s: float, slos: list[SLO], sample_floor: int = SAMPLE_FLOOR,
                  scenarios: list[str] | None = None, scope: str | None = None,
                  windows: list[tuple[float, float, float]] = ()) -> tuple[list[Step], list[str], list[str]]:
    """Steps with their report entries; notes say what was skipped and why, warnings which steps
    were too short to trust their throughput. ``scenarios``: the run's (default: the rows'); ``scope``:
    the one scenario these rows are of (None: several); ``windows``: the search's judged windows."""
    spans, notes = find_steps(df)
    if scenarios is None:
        scenarios = [str(s) for s in df["scenario"].astype(str).unique()]
    scenario_col = df["scenario"].astype(str).to_numpy(dtype=object)
    model_col = model_column(df)
    warnings: list[str] = []
    start = df["start_time"].to_numpy(dtype=float)
    end_t = df["end_time"].to_numpy(dtype=float)
    ok = df["ok"].to_numpy(dtype=bool)
    status = df["status"].astype("category")  # compared by code, not as 10 M strings
    names, codes = status.cat.categories, status.cat.codes.to_numpy()
    cancelled = (status == "cancelled").to_numpy()
    cols = {c: (df[c].to_numpy(dtype=float) if c in df.columns else np.full(len(df), np.nan))
            for c in (*LATENCY_FIELDS, "completion_tokens", "prompt_tokens", *(r.row_column for r in catalog.RATES))}
    rates = tuple(r for r in catalog.RATES if np.isfinite(cols[r.when]).any())  # embeddings: inputs/s; audio: RTFx
    audio = bool(np.isfinite(cols[catalog.REQUEST_RTFX.when]).any())
    good = ok.copy()  # a failed request is never good
    for slo in slos:
        if slo.column is not None:
            within = np.nan_to_num(cols[slo.column], nan=np.inf) <= slo.limit
            good &= within if slo.model is None else (within | (model_col != slo.model))  # a model's: its rows
    open_loop = "arrival_rate" in df.columns and df["level"].equals(df["arrival_rate"].astype(float))
    users_col = df["users"].to_numpy(dtype=float)
    longest = float(np.nanmax(end_t - start)) if len(start) else 0.0
    steps: list[Step] = []
    for level, s0, m0, s1 in judged_spans(spans, list(windows), warmup_s):
        name = f"{level:g} req/s arrivals" if open_loop else f"{level:g} users"
        if s1 - m0 <= 0:
            notes.append(f"step of {name} lasted {s1 - s0:.1f} s, not longer than the {warmup_s:g} s "
                         "warm-up: not measured")
            continue
        users = int(level)
        if open_loop:
            ran = users_col[(start >= s0) & (start < s1)]
            users = int(pd.Series(ran).mode().iloc[0]) if len(ran) else 0
        step = Step(users=users, start=s0, end=s1, measured_from=m0)
        dur = step.duration
        started = (start >= m0) & (start < s1) & ~cancelled
        ok_started = started & ok
        # Rows whose lifetime can overlap the window: started before its end, ended after its start.
        near = slice(int(np.searchsorted(start, m0 - longest, "left")), int(np.searchsorted(start, s1, "left")))
        share = np.where(ok[near], _share_inside(start[near], end_t[near], m0, s1), 0.0)
        out_tok = float(np.nansum(share * cols["completion_tokens"][near]))
        in_tok = float(np.nansum(share * cols["prompt_tokens"][near]))
        by_status: dict[str, int] = {}
        for code, n in zip(*np.unique(codes[started & ~ok], return_counts=True), strict=True):
            by_status[str(names[code])] = int(n)
        entry: dict[str, Any] = {
            "level": level if open_loop else int(level),
            "users": users,
            "arrival_rate": level if open_loop else None,
            "start_time": round(s0, 3),
            "measured_from": round(m0, 3),
            "end_time": round(s1, 3),
            "duration_s": round(dur, 3),
            "requests": int(started.sum()),
            "ok": int(ok_started.sum()),
            "errors": int((started & ~ok).sum()),
            "errors_by_status": by_status,
            "rps": round(float(share.sum()) / dur, 4),
            "rps_ci95": rate_ci(start[near][ok[near]], end_t[near][ok[near]], m0, s1),
            "output_tps": round(out_tok / dur, 3),
            "total_tps": round((out_tok + in_tok) / dur, 3),
        }
        for rate in rates:
            entry[rate.name] = round(float(np.nansum(share * cols[rate.row_column][near])) / dur, 3)
        for f in LATENCY_FIELDS:
            v = cols[f][ok_started]
            entry[f] = _pcts(v[~np.isnan(v)])
        if audio:  # transcription: each ok request's audio seconds per second of its E2E
            with np.errstate(divide="ignore", invalid="ignore"):
                v = cols[catalog.REQUEST_RTFX.row_column][ok_started] / (cols["e2e_ms"][ok_started] / 1000.0)
            entry[catalog.REQUEST_RTFX.name] = _pcts(v[np.isfinite(v)])
        entry["goodput_rps"] = round(float((share * good[near]).sum()) / dur, 4)
        window = WindowRows(status[started], scenario_col[started],
                            {c: cols[c][started] for c in {s.column for s in slos if s.column}}, model_col[started])
        verdict = judge_step(window, slos, sample_floor, scenarios, dur, scope)
        entry["thin"] = verdict.thin
        entry["slo"] = verdict.slo
        entry["slo_met"] = not verdict.broken if verdict.slo else None
        entry["verdict"] = step_verdict(entry, bool(verdict.slo))
        mean_e2e = entry["e2e_ms"]["mean"]
        entry["short"] = bool(mean_e2e is not None and dur < SHORT_STEP_E2E * mean_e2e / 1000.0)
        if entry["thin"]:
            entry["note"] = f"{verdict.why}: no verdict, never capacity"
        if entry["short"]:
            # Advice in seconds to add, not a length: a step's window also loses what the rows do not
            # cover (the last step ends at its last request's start), so "at least warm-up + 3 × E2E"
            # fell short again when followed. Each second added to the steps adds one to the window.
            needed_s = SHORT_STEP_E2E * mean_e2e / 1000.0
            more = max(1, math.ceil(needed_s - dur))
            warnings.append(f"step of {name}: measured {dur:.1f} s, shorter than {SHORT_STEP_E2E:g} × its mean E2E "
                         f"({mean_e2e / 1000.0:.1f} s): its throughput is rough; make steps at least {more} s "
                         f"longer (after the {warmup_s:g}-s warm-up it needs {needed_s:.1f} s)")
        step.data = entry
        steps.append(step)
    return steps, notes, warnings


def step_verdict(entry: dict[str, Any], has_slos: bool) -> str:
    """``met``, ``broken``, ``too few requests`` or ``–`` (no SLO); ``borderline`` appended when a
    limit lies inside its interval."""
    if entry["thin"]:
        return "too few requests"
    if not has_slos:
        return "–"
    base = "met" if entry["slo_met"] else "broken"
    edgy = [k for k, v in entry["slo"].items() if v.get("borderline")]
    return f"{base} (borderline)" if edgy else base


def mark_step_endings(steps: list[Step], step_log: Any) -> int:
    """Say how each step ended, from PREFIX_run.json's ``shape.step_log`` (the step shape with
    ``--step-precision``): ``ended`` ("precise": early, its intervals were narrow enough; "cap":
    at ``--step-seconds``) and ``ended_why``. Log entries are matched to steps in order, by user
    count. Returns how many steps ended early."""
    if not isinstance(step_log, list):
        return 0
    entries = [e for e in step_log if isinstance(e, dict) and e.get("ended") in ("precise", "cap")]
    at, early = 0, 0
    for step in steps:
        for i in range(at, len(entries)):
            if entries[i].get("users") == step.data["users"]:
                step.data["ended"], step.data["ended_why"] = entries[i]["ended"], str(entries[i].get("why", ""))
                early += entries[i]["ended"] == "precise"
                at = i + 1
                break
    return early
