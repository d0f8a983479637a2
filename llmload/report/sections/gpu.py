"""The GPUs' side of each load step, from ``PREFIX_gpu_metrics.csv`` (``--gpu-metrics``): what the
GPUs did and what a token cost in joules. Reads the file and adds keys; the one thing it changes
is which steps may be capacity (a throttled step, or one with an XID error, is not).

Per step (``step["gpu"]`` in report.json), over the GPU scrapes inside the step's measured window
(:func:`~llmload.server_metrics.gpu_window.gpu_step`), per GPU (``per_gpu``) and summed:
utilisation, SM, DRAM and tensor activity, memory used, power, energy (the energy counter's
difference), the bound-by verdict, throttling and XID errors; and, against the client's rows:

* ``output_tokens``: the output tokens of ok requests inside ``[first scrape, last scrape]``, each
  request's first token at its TTFT and the rest spread evenly up to its end (the client counts
  them; the same window as the energy);
* ``requests``: ok requests in the window, each spread over its lifetime (as ``rps``);
* ``j_per_output_token`` = energy ÷ output_tokens, ``j_per_request`` = energy ÷ requests;
* with ``--usd-per-kwh P``: ``energy_usd_per_hour`` = power (kW) × P and
  ``energy_usd_per_million_output_tokens`` = J/token × 10⁶ ÷ 3.6 × 10⁶ × P.

**Throttled steps.** A step whose GPUs throttled (or logged an XID error) is flagged
(``gpu_flag``); it is never the capacity step unless ``--allow-throttled``: its latencies are
those of a slower GPU than the one being sized (``never_capacity`` names why; capacity skips it
as it skips a thin step). :func:`flag_gpu_steps` does this before the capacity is found.

At capacity, ``capacity["gpu"]`` and, with a price, ``cost["energy_usd_per_hour"]`` and
``cost["energy_usd_per_million_output_tokens"]`` beside the GPU-hour cost. :func:`gpu_columns`
gives ``llmload compare`` and ``llmload sweep`` one run's GPU columns.

Usage::

    run = load_gpu_metrics("runs/x")             # None when the run has no GPU metrics
    flag_gpu_steps(steps, run, allow_throttled=False)
    attach_gpu_metrics(report, run)              # what build_report does
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pandas as pd

from llmload import files
from llmload.report.sections.metrics_csv import read_metrics_csv
from llmload.report.steps import Step
from llmload.server_metrics.gpu import BY_NAME, GpuIdentity, gpu_readings
from llmload.server_metrics.gpu_window import GpuStep, Points, gpu_step
from llmload.server_metrics.series import UP, parse_labels

J_PER_KWH = 3.6e6
_ROUND = {"util": 4, "sm_active": 4, "dram_active": 4, "tensor_active": 4, "power_w": 2, "fb_used_mib": 1,
          "fb_used_mib_max": 1, "energy_j": 3, "sm_clock_mhz_min": 0, "temp_c_max": 1}


@dataclass
class GpuRun:
    path: str
    points: Points
    who: dict[str, GpuIdentity]
    endpoints: list[str]
    first_xid: dict[str, float] = field(default_factory=dict)
    failed_scrapes: int = 0
    warnings: list[str] = field(default_factory=list)


def gpu_metrics_path(prefix: str) -> str:
    return files.path(files.prefix_of(prefix), files.GPU_METRICS)


def load_gpu_metrics(prefix: str | list[str]) -> GpuRun | None:
    """The run's GPU scrapes, every exporter of a tick together; None without the file."""
    candidates = [gpu_metrics_path(p) for p in ([prefix] if isinstance(prefix, str) else prefix)]
    path, df, problem = read_metrics_csv(candidates, "GPU metrics")
    if path is None:
        return None
    if df is None:
        return GpuRun(path, [], {}, [], warnings=[problem or ""])
    df = df[(df["metric"].isin(set(BY_NAME) | {UP})) & df["time"].notna()]
    points: Points = []
    who: dict[str, GpuIdentity] = {}
    endpoints: set[str] = set()
    failed = 0
    for t, tick in df.groupby("time", sort=True):
        rows_by_endpoint: dict[str, list[tuple[str, Any, float]]] = defaultdict(list)
        for endpoint, metric, labels, value in tick[["endpoint", "metric", "labels", "value"]].itertuples(
                index=False, name=None):
            if metric == UP:
                failed += value != 1
                endpoints.add(endpoint)
            else:
                rows_by_endpoint[endpoint].append((metric, parse_labels(labels), float(value)))
        merged: dict[str, dict[str, float]] = {}
        for endpoint, rows in rows_by_endpoint.items():
            readings, ids = gpu_readings(rows, endpoint)
            merged.update(readings)
            for key, ident in ids.items():
                who.setdefault(key, ident)
        if merged:
            points.append((float(t), merged))
    first_xid: dict[str, float] = {}
    for _, readings in points:
        for key, reading in readings.items():
            if "xid" in reading:
                first_xid.setdefault(key, reading["xid"])
    return GpuRun(path, points, who, sorted(endpoints), first_xid, failed_scrapes=int(failed))


def _flag(stats: GpuStep) -> str | None:
    total = stats.total
    why = []
    if total.get("throttled"):
        reasons = sorted({r for e in stats.per_gpu.values() for r in e["throttle_reasons"]})
        why.append("GPU throttled (" + ", ".join(reasons) + ")")
    if total.get("xid_errors"):
        codes = ", ".join(str(x) for x in total["xid_errors"] if x >= 0)
        why.append(f"XID error {codes}" if codes else "XID error")
    return "; ".join(why) or None


def flag_gpu_steps(steps: list[Step], run: GpuRun | None, allow_throttled: bool) -> None:
    """Mark each step whose GPUs throttled or logged an XID error (``gpu_flag``); unless
    ``allow_throttled``, such a step is never capacity (``never_capacity``)."""
    if run is None or not run.points:
        return
    for s in steps:
        flag = _flag(gpu_step(run.points, s.measured_from, s.end, run.first_xid))
        if flag is None:
            continue
        s.data["gpu_flag"] = flag
        if not allow_throttled:
            s.data["never_capacity"] = flag
            s.data["note"] = "; ".join(filter(None, (s.data.get("note"), f"{flag}: never capacity "
                                                                          "(--allow-throttled to allow)")))


def _share(a: np.ndarray, b: np.ndarray, w0: float, w1: float) -> np.ndarray:
    """Each interval's share inside [w0, w1] (a zero-length one: 1 if it lies inside)."""
    life = b - a
    inside = np.clip(np.minimum(b, w1) - np.maximum(a, w0), 0.0, None)
    point = ((b >= w0) & (b <= w1)).astype(float)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(life > 0, inside / np.where(life > 0, life, 1.0), point)


def client_work(df: pd.DataFrame, w0: float, w1: float) -> tuple[float, float]:
    """(output tokens, requests) of the ok rows inside [w0, w1] (see the module docstring)."""
    ok = df[df["ok"]]
    start = ok["start_time"].to_numpy(dtype=float)
    end = ok["end_time"].to_numpy(dtype=float)
    ttft = ok["ttft_ms"].to_numpy(dtype=float) if "ttft_ms" in ok else np.full(len(ok), np.nan)
    tokens = np.nan_to_num(ok["completion_tokens"].to_numpy(dtype=float))
    first = np.minimum(np.where(np.isnan(ttft), start, start + ttft / 1000.0), end)
    first_inside = ((first >= w0) & (first <= w1)).astype(float)
    rest = np.clip(tokens - 1.0, 0.0, None)
    output = float(np.sum(np.minimum(tokens, 1.0) * first_inside + rest * _share(first, end, w0, w1)))
    return output, float(np.sum(_share(start, end, w0, w1)))


def _r(v: Any, nd: int) -> Any:
    return round(v, nd) if isinstance(v, float) else v


def step_gpu(run: GpuRun, step: Step, df: pd.DataFrame, usd_per_kwh: float | None) -> dict[str, Any] | None:
    """One step's ``gpu`` entry, or None without two GPU scrapes in its window."""
    stats = gpu_step(run.points, step.measured_from, step.end, run.first_xid)
    if stats.first_t is None or stats.last_t is None or stats.span_s <= 0:
        return None
    total = {k: _r(v, _ROUND.get(k, 4)) for k, v in stats.total.items()}
    output, requests = client_work(df, stats.first_t, stats.last_t)
    energy = stats.total.get("energy_j")
    entry: dict[str, Any] = {
        **total, "window": [round(stats.first_t, 3), round(stats.last_t, 3)], "span_s": round(stats.span_s, 3),
        "output_tokens": round(output, 1), "requests": round(requests, 2),
        "j_per_output_token": round(energy / output, 6) if energy is not None and output > 0 else None,
        "j_per_request": round(energy / requests, 4) if energy is not None and requests > 0 else None,
    }
    power = stats.total.get("power_w")
    if usd_per_kwh is not None:
        entry["energy_usd_per_hour"] = round(power / 1000.0 * usd_per_kwh, 8) if power is not None else None
        jpt = entry["j_per_output_token"]
        entry["energy_usd_per_million_output_tokens"] = (None if jpt is None else
                                                         round(jpt * 1e6 / J_PER_KWH * usd_per_kwh, 8))
    entry["per_gpu"] = {key: {**run.who[key].to_json(), **{k: _r(v, _ROUND.get(k, 4)) for k, v in e.items()}}
                        for key, e in stats.per_gpu.items()}
    return entry


def attach_gpu_metrics(report: Any, run: GpuRun | None) -> None:
    """Add ``gpu`` to each step of the whole run, ``capacity["gpu"]``, and the energy cost."""
    if run is None:
        report.notes.append("GPU metrics: none in this run (--gpu-metrics URL of a DCGM exporter puts the GPUs "
                            "in the report)")
        return
    report.warnings += run.warnings
    steps = report.overall.steps
    usd_per_kwh = report.options.usd_per_kwh
    for s in steps:
        entry = step_gpu(run, s, report.df, usd_per_kwh)
        if entry is not None:
            s.data["gpu"] = entry
    cap = report.overall.capacity
    at = next((s.data["gpu"] for s in steps if s.data["start_time"] == cap.get("start_time") and "gpu" in s.data),
              None)
    if at is not None:
        cap["gpu"] = {k: at.get(k) for k in ("gpus", "power_w", "energy_j", "j_per_output_token", "j_per_request",
                                             "util", "dram_active", "tensor_active", "bound_by", "bound_by_reason",
                                             "energy_usd_per_hour", "energy_usd_per_million_output_tokens")}
        cost = report.overall.cost
        if cost is not None and usd_per_kwh is not None:
            cost["usd_per_kwh"] = usd_per_kwh
            cost["energy_usd_per_hour"] = at.get("energy_usd_per_hour")
            cost["energy_usd_per_million_output_tokens"] = at.get("energy_usd_per_million_output_tokens")
    flagged = [s.data for s in steps if s.data.get("gpu_flag")]
    for d in flagged:
        report.warnings.append(f"GPU metrics, step {d['level']:g}: {d['gpu_flag']}"
                               + ("" if report.options.allow_throttled else ": never capacity (--allow-throttled "
                                  "to allow)"))
    report.notes.append(
        f"GPU metrics: {len(run.points)} scrape(s) of {', '.join(run.endpoints) or 'no exporter'}, "
        f"{run.failed_scrapes} failed, {len(run.who)} GPU(s); J per output token = the GPUs' energy (their "
        "energy counters' difference) ÷ the output tokens the client received between the same two scrapes")


def _pct(v: Any) -> str:
    return "–" if v is None else f"{v * 100:.0f}"


def _num(v: Any, nd: int) -> str:
    return "–" if v is None else f"{v:,.{nd}f}"


def gpu_table(report: Any) -> tuple[str, list[str], list[str], list[list[str]]] | None:
    """The report's GPU block: heading, text, table header and rows; None without GPU metrics."""
    steps = [s.data for s in report.overall.steps if "gpu" in s.data]
    if not steps:
        return None
    priced = report.options.usd_per_kwh is not None
    header = [report.level_label, "GPUs", "util %", "SM / DRAM / tensor active %", "memory used GiB", "power W",
              "energy J", "J per output token", "J per request", *(["energy $ per 1M output tokens"] if priced else []),
              "bound by", "throttled / XID"]
    rows = []
    for d in steps:
        g = d["gpu"]
        flag = d.get("gpu_flag") or "–"
        rows.append([f'{d["level"]:g}', str(g["gpus"]), _pct(g["util"]),
                     f'{_pct(g["sm_active"])} / {_pct(g["dram_active"])} / {_pct(g["tensor_active"])}',
                     _num(None if g["fb_used_mib"] is None else g["fb_used_mib"] / 1024, 1), _num(g["power_w"], 0),
                     _num(g["energy_j"], 0), _num(g["j_per_output_token"], 4), _num(g["j_per_request"], 2),
                     *([_num(g.get("energy_usd_per_million_output_tokens"), 4)] if priced else []), g["bound_by"],
                     flag])
    text = []
    cap = report.overall.capacity.get("gpu")
    if cap:
        text.append(f"At capacity: {_num(cap['j_per_output_token'], 4)} J per output token, "
                    f"{_num(cap['j_per_request'], 2)} J per request, {_num(cap['power_w'], 0)} W over "
                    f"{cap['gpus']} GPU(s); {cap['bound_by']} ({cap['bound_by_reason']}).")
    text.append("Energy is the GPUs' energy counters' difference over the step's scrapes; J per output token "
                "divides it by the output tokens the client received between the same scrapes. Bound by: "
                "underused when DRAM and tensor activity are both below 30 % (and SM activity below 50 %), else "
                "memory-bandwidth-bound when DRAM is at least as active as the tensor pipes, else compute-bound "
                "(see docs/gpu.md). A throttled step, or one with an XID error, is never capacity unless "
                "--allow-throttled.")
    return "GPUs", text, header, rows


def gpu_columns(report: Any) -> dict[str, Any]:
    """One run's GPU columns for ``llmload compare`` and ``llmload sweep`` (empty without GPU metrics):
    at the capacity step, J per output token and per request, power, the bound-by verdict, and the
    energy cost per 1M output tokens (with ``--usd-per-kwh``)."""
    cap = report.overall.capacity.get("gpu")
    if not cap:
        return {}
    return {"j_per_output_token": cap["j_per_output_token"], "j_per_request": cap["j_per_request"],
            "gpu_power_w": cap["power_w"], "gpu_bound_by": cap["bound_by"],
            "energy_usd_per_million_output_tokens": cap.get("energy_usd_per_million_output_tokens")}
