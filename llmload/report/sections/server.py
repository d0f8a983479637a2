"""The server's side of each load step, from ``PREFIX_server_metrics.csv``: what the engine said
while the client measured. Reads the file, adds keys, never changes what the rest of the report
computed.

Per step (``step["server"]`` in report.json), over the step's measured window:

* KV-cache usage, running and waiting requests: mean and max (waiting also its trend per s);
* the server's token rates next to the client's (``output_tps``, and input = ``total_tps −
  output_tps``): they should agree; a difference beyond 15 % (or beyond the mean E2E ÷ the
  time between the step's first and last scrape, when larger: the client counts a request's
  tokens when it completes) gets a warning saying why it may be;
* server TTFT and E2E next to the client's over the same requests (``server_join``: those whose
  first token, or end, reached the client between the two scrapes that bound the server's delta;
  ``ttft_requests``/``e2e_requests`` count both sides), and the gap (client − server: network, HTTP
  and the client; the server starts its clock when the request reaches it, so the mean gap is
  never below 0 beyond the scrapes' ``window.resolution_ms``); each interpolated server percentile
  with the bucket it lies in (``ttft_bounds_ms``: how coarse it is);
* the prefix-cache hit rate the server counted; preemptions; server queue time, ITL and E2E;
* the server-side verdict (:func:`~llmload.server_metrics.server_verdict`: ``kv_cache``,
  ``queueing``, ``compute``) with its evidence, TPOT compared with the first step.

At the knee, ``capacity["server_limited_by"]``: the verdict of the first step above capacity
(the one that broke an SLO: where the limit shows), else of the capacity step itself.
:func:`server_columns` gives ``llmload compare`` one run's server columns.

Usage::

    run = load_server_metrics("runs/x")          # None when the run has no server metrics
    attach_server_metrics(report, "runs/x")      # what build_report does
    rows = server_table(report)                  # (heading, text, header, rows) for render.py
    server_columns(report)                       # {"server_limited_by": "kv_cache", ...}
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from llmload import files
from llmload.report.format import fmt, fmt_pct
from llmload.report.model import Report
from llmload.report.sections.metrics_csv import read_metrics_csv
from llmload.report.server_join import client_between, gaps, join_rows
from llmload.server_metrics import aggregate_step, server_verdict, token_rate_warning
from llmload.server_metrics.known import COMMON, HISTOGRAM, ServerSnapshot
from llmload.server_metrics.series import SCRAPE_DURATION, UP, FleetSeries, parse_labels, snapshot_from_rows
from llmload.server_metrics.step_stats import StepServerStats

_READ = {UP, SCRAPE_DURATION} | set(COMMON) | {f"{n}{s}" for n, c in COMMON.items() if c.kind == HISTOGRAM
                               for s in ("_bucket", "_sum", "_count")}
TOKEN_RATE_TOLERANCE = 0.15
VERDICT_WORDS = {"kv_cache": "KV cache", "queueing": "queueing", "compute": "compute",
                 "not_saturated": "not saturated", "not_enough_evidence": "not enough evidence", "unknown": "unknown"}


@dataclass
class ServerRun:
    path: str
    points: list[tuple[float, ServerSnapshot]]
    endpoints: list[str]
    engines: dict[str, str]
    failed_scrapes: int = 0
    warnings: list[str] = field(default_factory=list)
    durations: dict[float, float] = field(default_factory=dict)
    """Each tick's longest scrape (s): how well its time says when the engine wrote its numbers."""


def metrics_path(prefix: str) -> str:
    return files.path(files.prefix_of(prefix), files.SERVER_METRICS)


def load_server_metrics(prefix: str | list[str]) -> ServerRun | None:
    """The run's scrapes, every endpoint of a tick combined; None without the file. Of several
    request files (a master's and its workers'), the first with a server-metrics file beside it."""
    candidates = [metrics_path(p) for p in ([prefix] if isinstance(prefix, str) else prefix)]
    path, df, problem = read_metrics_csv(candidates, "server metrics")
    if path is None:
        return None
    if df is None:
        return ServerRun(path, [], [], {}, warnings=[problem or ""])
    df = df[df["metric"].isin(_READ) & df["time"].notna()]
    series = FleetSeries()
    engines: dict[str, str] = {}
    failed = 0
    durations: dict[float, float] = {}
    for t, tick in df.groupby("time", sort=True):
        by_endpoint: dict[str, list[tuple[str, str, float]]] = defaultdict(list)
        up: dict[str, bool] = {}
        for endpoint, metric, labels, value in tick[["endpoint", "metric", "labels", "value"]].itertuples(
                index=False, name=None):
            if metric == SCRAPE_DURATION:
                durations[float(t)] = max(durations.get(float(t), 0.0), float(value))
            elif metric == UP:
                up[endpoint] = value == 1
                engine = dict(parse_labels(labels)).get("engine")
                if engine:
                    engines[endpoint] = engine
            else:
                by_endpoint[endpoint].append((metric, labels, value))
        failed += sum(1 for ok in up.values() if not ok)
        series.add(float(t), {e: snapshot_from_rows(by_endpoint.get(e, []), engines.get(e)) if ok else None
                              for e, ok in up.items()})
    endpoints = sorted(series.answered)
    return ServerRun(path, series.points, endpoints, engines, failed_scrapes=failed, durations=durations)


def _pcts(d: dict[str, float | None] | None) -> dict[str, float | None] | None:
    return None if d is None else {k: None if v is None else round(v, 3) for k, v in d.items()}


def _r(v: float | None, nd: int = 4) -> float | None:
    return None if v is None else round(v, nd)


def _bounds(d: dict[str, tuple[float, float]] | None) -> dict[str, list[float | None]] | None:
    """Bucket bounds for JSON: an open upper end (the ``+Inf`` bucket) is null."""
    if not d:
        return None
    return {q: [None if abs(v) == float("inf") else round(v, 3) for v in b] for q, b in d.items()}


def _join(stats: StepServerStats, rows: Any, resolution_s: float) -> dict[str, Any]:
    """The server's TTFT and E2E beside the client's over the requests the server's delta covers."""
    if stats.first_scrape is None or stats.last_scrape is None or rows is None:
        return {"client_ttft_ms": None, "ttft_requests": None, "ttft_gap_ms": None, "client_e2e_ms": None,
                "e2e_requests": None, "e2e_gap_ms": None, "window": None}
    lo, hi = stats.first_scrape, stats.last_scrape
    ttft, e2e = (client_between(rows, lo, hi, m, resolution_s) for m in ("ttft", "e2e"))
    return {
        "client_ttft_ms": ttft.to_json(),
        "ttft_requests": ttft.counts_json(stats.ttft_count),
        "ttft_gap_ms": gaps(ttft, stats.ttft_mean_ms, stats.ttft_ms),
        "client_e2e_ms": e2e.to_json(),
        "e2e_requests": e2e.counts_json(stats.e2e_count),
        "e2e_gap_ms": gaps(e2e, stats.e2e_mean_ms, None),
        "window": {"from": round(lo, 6), "to": round(hi, 6), "resolution_ms": round(resolution_s * 1000.0, 3)},
    }


def step_server(stats: StepServerStats, step: dict[str, Any], baseline: tuple[StepServerStats, dict[str, Any]],
                span_s: float, previous: str | None = None, rows: Any = None,
                resolution_s: float = 0.0) -> dict[str, Any]:
    """One step's ``server`` entry (see the module docstring); ``span_s``: from its first scrape to its
    last; ``rows``: the run's request rows (``server_join.JOIN_COLUMNS``, every phase), ``resolution_s``:
    the longer of the two bounding scrapes."""
    client_input_tps = step["total_tps"] - step["output_tps"]
    # The client counts a request's tokens when it completes (and some servers when it starts or
    # ends), so a window is uncertain by about one request's duration: short steps of long
    # requests cannot agree better than that.
    e2e_s = ((step.get("e2e_ms") or {}).get("mean") or 0.0) / 1000.0
    tolerance = max(TOKEN_RATE_TOLERANCE, e2e_s / span_s if span_s > 0 else 0.0)
    warnings = [w for w in (token_rate_warning(stats.generation_tps, step["output_tps"], tolerance=tolerance),
                            token_rate_warning(stats.prompt_tps, client_input_tps, what="prompt", tolerance=tolerance))
                if w]
    verdict = server_verdict(stats, client=step, baseline=baseline[0], baseline_client=baseline[1],
                             previous=previous)
    ttft, e2e = _pcts(stats.ttft_ms), _pcts(stats.e2e_ms)
    if ttft is not None:
        ttft["mean"] = _r(stats.ttft_mean_ms, 3)
    if e2e is not None:
        e2e["mean"] = _r(stats.e2e_mean_ms, 3)
    return {
        "engine": stats.engine, "scrapes": stats.scrapes,
        "kv_usage": {"mean": _r(stats.kv_usage_mean), "max": _r(stats.kv_usage_max)},
        "running": {"mean": _r(stats.running_mean, 2), "max": stats.running_max},
        "waiting": {"mean": _r(stats.waiting_mean, 2), "max": stats.waiting_max,
                    "trend_per_s": _r(stats.waiting_trend_per_s)},
        "preemptions": stats.preemptions,
        "output_tps": _r(stats.generation_tps, 2), "client_output_tps": step["output_tps"],
        "prompt_tps": _r(stats.prompt_tps, 2), "client_prompt_tps": round(client_input_tps, 3),
        "token_rate_warnings": warnings,
        "prefix_cache_hit_rate": _r(stats.prefix_cache_hit_rate),
        "spec_decode": None if stats.spec_accept_rate is None and stats.spec_accept_length is None else {
            "accept_rate": _r(stats.spec_accept_rate), "mean_accepted_length": _r(stats.spec_accept_length, 3)},
        "ttft_ms": ttft, "ttft_bounds_ms": _bounds(stats.ttft_bounds_ms),
        **_join(stats, rows, resolution_s),
        "itl_ms": _pcts(stats.itl_ms), "queue_time_ms": _pcts(stats.queue_time_ms), "e2e_ms": e2e,
        "verdict": {"limited_by": verdict.limited_by, "reason": verdict.reason,
                    "evidence": {k: round(v, 4) for k, v in verdict.evidence.items()}},
    }


def attach_server_metrics(report: Report, prefix: str | list[str], warmup_timing: Any = None) -> ServerRun | None:
    """Add ``server`` to each step of the whole run and ``server_limited_by`` to its capacity.
    ``warmup_timing``: the run's warm-up rows (``Loaded.warmup_timing``), which the server counted too."""
    run = load_server_metrics(prefix)
    if run is None:
        return None
    report.warnings += run.warnings
    steps = report.overall.steps
    if not run.points or not steps:
        return run
    stats = [aggregate_step(run.points, s.measured_from, s.end) for s in steps]
    baseline = (stats[0], steps[0].data)
    times = [t for t, _ in run.points]
    rows = join_rows(report.df)
    if warmup_timing is not None and len(warmup_timing):
        rows = pd.concat([rows, warmup_timing], ignore_index=True)
    previous = None
    for s, st in zip(steps, stats, strict=True):
        inside = [t for t in times if s.measured_from <= t <= s.end]
        resolution = max((run.durations.get(t, 0.0) for t in inside[:1] + inside[-1:]), default=0.0)
        s.data["server"] = step_server(st, s.data, baseline, inside[-1] - inside[0] if inside else 0.0, previous,
                                       rows, resolution)
        previous = s.data["server"]["verdict"]["limited_by"]
        for w in s.data["server"]["token_rate_warnings"]:
            report.warnings.append(f"server metrics, step {s.data['level']:g}: {w}")
    cap = report.overall.capacity
    if "next_step_level" in cap:  # the first failing step: where the limit shows
        knee = next((s for s in steps if s.data["level"] == cap["next_step_level"] and not s.data["slo_met"]), None)
    else:  # the capacity step itself (the one step all the capacity's numbers come from)
        knee = next((s for s in steps if s.data["start_time"] == cap.get("start_time")), None)
    if knee is not None:
        v = knee.data["server"]["verdict"]
        cap["server_limited_by"] = {"level": knee.data["level"], "users": knee.data["users"],
                                    "above_capacity": "next_step_level" in cap, **v}
    report.notes.append(
        f"server metrics: {len(run.points)} scrape(s) of {', '.join(run.endpoints)} "
        f"({', '.join(sorted(set(run.engines.values()))) or 'unknown engine'}), {run.failed_scrapes} failed; "
        "TTFT gap = client − server (network, HTTP and client time; the server's clock starts when the request "
        "reaches it)")
    return run


def _pair(server: Any, client: Any, nd: int = 1) -> str:
    return f"{fmt(server, nd)} ({fmt(client, nd)})"


def server_table(report: Report) -> tuple[str, list[str], list[str], list[list[str]]] | None:
    """The report's server block: heading, text, table header and rows; None without server metrics."""
    steps = [s.data for s in report.overall.steps if "server" in s.data]
    if not steps:
        return None
    header = [report.level_label, "KV % mean/max", "running mean/max", "waiting mean/max", "preempted",
              "server out tok/s (client)", "server prompt tok/s (client)", "prefix hit rate",
              "TTFT requests server/client", "TTFT mean server/client (gap)", "TTFT p95 server [bucket]/client",
              "server says"]
    rows = []
    for d in steps:
        sv = d["server"]
        gap = sv["ttft_gap_ms"] or {}
        ttft = sv["ttft_ms"] or {}
        client = sv["client_ttft_ms"] or {}
        counts = sv["ttft_requests"] or {}
        bucket = (sv.get("ttft_bounds_ms") or {}).get("p95")
        bucket_text = "" if not bucket else f' [{fmt(bucket[0], 0)}–{"∞" if bucket[1] is None else fmt(bucket[1], 0)}]'

        rows.append([
            f'{d["level"]:g}', f'{fmt_pct(sv["kv_usage"]["mean"])} / {fmt_pct(sv["kv_usage"]["max"])}',
            f'{fmt(sv["running"]["mean"], 1)} / {fmt(sv["running"]["max"], 0)}',
            f'{fmt(sv["waiting"]["mean"], 1)} / {fmt(sv["waiting"]["max"], 0)}', fmt(sv["preemptions"], 0),
            _pair(sv["output_tps"], sv["client_output_tps"]), _pair(sv["prompt_tps"], sv["client_prompt_tps"]),
            fmt(sv["prefix_cache_hit_rate"], 3),
            f'{fmt(counts.get("server"), 0)} / {fmt(counts.get("client"), 0)}',
            f'{fmt(ttft.get("mean"), 1)} / {fmt(client.get("mean"), 1)} ({fmt(gap.get("mean"), 1)})',
            f'{fmt(ttft.get("p95"), 1)}{bucket_text} / {fmt(client.get("p95"), 1)}',
            VERDICT_WORDS.get(sv["verdict"]["limited_by"], sv["verdict"]["limited_by"])])
    text = []
    knee = report.overall.capacity.get("server_limited_by")
    if knee:
        where = "the first step above capacity" if knee["above_capacity"] else "the capacity step"
        text.append(f"Limited by (server side): {VERDICT_WORDS.get(knee['limited_by'], knee['limited_by'])} "
                    f"— at {where} ({knee['level']:g}): {knee['reason']}.")
    text.append("Both sides count the same requests: those whose first token reached the client between the "
                "step's first and last scrape (the requests the server's histogram delta holds). The TTFT gap is "
                "client − server on the means (exact: from the histogram's sum and count); server percentiles are "
                "interpolated inside the histogram bucket shown beside them, so they are only as exact as it.")
    for d in steps:
        text += [f"Step {d['level']:g}: {w}" for w in d["server"]["token_rate_warnings"]]
        spec = d["server"].get("spec_decode")
        if spec:  # speculative decoding: what the draft model bought at this load
            text.append(f"Step {d['level']:g}: speculative decoding accepted {fmt_pct(spec['accept_rate'])} % of "
                        f"draft tokens, {fmt(spec['mean_accepted_length'], 2)} tokens per decode step")
    return "Server metrics", text, header, rows


def server_columns(report: Report) -> dict[str, Any]:
    """One run's server columns for ``llmload compare`` (empty without server metrics): the
    verdict at the knee, and at the capacity step KV usage, queue, server TTFT and the TTFT gap."""
    knee = report.overall.capacity.get("server_limited_by")
    start = report.overall.capacity.get("start_time")
    cap = next((s.data["server"] for s in report.overall.steps if s.data["start_time"] == start and "server" in s.data),
               None)
    if knee is None and cap is None:
        return {}
    out: dict[str, Any] = {"server_limited_by": knee["limited_by"] if knee else None,
                           "server_limited_reason": knee["reason"] if knee else None}
    if cap is not None:
        out.update({
            "server_kv_usage_max": cap["kv_usage"]["max"], "server_waiting_mean": cap["waiting"]["mean"],
            "server_running_mean": cap["running"]["mean"], "server_output_tps": cap["output_tps"],
            "server_prefix_hit_rate": cap["prefix_cache_hit_rate"],
            "server_ttft_p50_ms": (cap["ttft_ms"] or {}).get("p50"),
            "ttft_gap_mean_ms": (cap["ttft_gap_ms"] or {}).get("mean")})
    return out
