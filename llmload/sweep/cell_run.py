"""One cell of a sweep: reset, an ordinary headless Locust run with its own ``--csv`` prefix under
DIR/cells/<id>/, then the report, in process. The outcome goes to ``cell.json`` (the finished
marker ``--resume`` reads) whether the cell succeeded or failed.

Usage::

    result = run_cell(plan, cell, "out/cells/small.chat.r1", stop=threading.Event())
    result["status"]     # "done", "failed" or "stopped"
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from llmload import files
from llmload.report import ReportError, ReportOptions, build_report, write_report
from llmload.report.sections.gpu import gpu_columns
from llmload.sweep.cells import Cell
from llmload.sweep.fleet.launch import Fleet
from llmload.sweep.frontier import TPOT_P95, TTFT_P95
from llmload.sweep.plan import Plan
from llmload.sweep.server import Server, ServerError, log_tail, reset_server

MARKER = "cell.json"
FLEET_FILE = "fleet.json"  # a fleet cell's replicas, router and processes, written once it routes
LOCUSTFILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "locustfile.py")
LOCUST_GRACE_S = 30.0  # after SIGTERM Locust writes its CSVs and stops its users (--stop-timeout 10)
FLEET_SCRAPE_S = 0.5  # each replica's /metrics: a 4-s step's window still gets several scrapes


def read_marker(cell_dir: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(cell_dir, MARKER), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def locust_command(plan: Plan, cell: Cell, url: str, prefix: str, metrics_urls: list[str] | None = None) -> list[str]:
    """The cell's Locust; a fleet's (``metrics_urls``: each replica's) runs the plan's steps × K
    users, reads every replica's metrics and sends the affinity headers."""
    load = plan.load
    k = max(1, cell.variant.replicas)
    scrape = ["--no-server-metrics"] if metrics_urls is None else [
        *[a for u in metrics_urls for a in ("--server-metrics", u)], "--server-metrics-interval", f"{FLEET_SCRAPE_S:g}",
        "--affinity-headers"]
    return [sys.executable, "-m", "locust", "-f", LOCUSTFILE, "--headless", "--host", url, "--csv", prefix,
            "--steps", ",".join(str(s * k) for s in load.steps), "--step-seconds", f"{load.step_seconds:g}",
            *(["--step-precision", f"{load.step_precision:g}", "--step-warmup-s", f"{load.warmup_s:g}"]
              if load.step_precision else []),
            "--stop-timeout", "10", "--only-summary", *scrape, *cell.workload.locust_args(),
            *[a for s in plan.slos for a in ("--slo", s.text())],
            *[a for u in cell.variant.deployment.gpu_metrics_urls(url) for a in ("--gpu-metrics", u)]]


def report_options(plan: Plan, cell: Cell) -> ReportOptions:
    d = cell.variant.deployment
    return ReportOptions(slos=list(plan.slos), warmup_s=plan.load.warmup_s, gpu_hourly_usd=d.gpu_hourly_usd,
                         gpus_per_replica=cell.variant.gpus, target_rps=plan.target_rps, headroom=plan.headroom,
                         usd_per_kwh=plan.usd_per_kwh)


def _cell_entry(cell: Cell) -> dict[str, Any]:
    d = cell.variant.deployment
    v = cell.variant
    fleet = {"base": v.base_id, "replicas": v.replicas, "policy": v.policy or None,
             "router": d.fleet.router if d.fleet else None, "gpus_per_replica": d.gpus} if v.replicas else {}
    return {"id": cell.id, "deployment": v.id, "deployment_name": d.name, "params": v.params,
            "workload": cell.workload.name, "repeat": cell.repeat, "gpus": v.gpus,
            "gpu_hourly_usd": d.gpu_hourly_usd, **fleet}


def run_cell(plan: Plan, cell: Cell, cell_dir: str, stop: threading.Event,
             on_report: Callable[[Any, str], None] | None = None) -> dict[str, Any]:
    """Run the cell and write its marker; ``on_report(report, cell_id)`` (the archive) gets its report.
    Never raises for the cell's own failures: they are its result."""
    os.makedirs(cell_dir, exist_ok=True)
    prefix = os.path.join(cell_dir, "run")
    for suffix in (files.REQUESTS, files.LLM_STATS, files.HISTORY, files.MANIFEST, files.GPU_METRICS):
        if os.path.exists(prefix + suffix):
            os.remove(prefix + suffix)  # a rerun (after a failure or a stop) starts clean, not appended
    entry = _cell_entry(cell) | {"prefix": prefix, "started": time.time()}
    t0 = time.monotonic()
    server: Server | Fleet | None = None
    try:
        if cell.variant.replicas:
            server = Fleet.start(cell.variant, cell_dir)
            entry["fleet"] = server.describe()
            files.replace_atomically(os.path.join(cell_dir, FLEET_FILE), json.dumps(entry["fleet"], indent=2))
            urls = [r.url for r in server.replicas]
        else:
            server = Server.start(cell.variant, os.path.join(cell_dir, "server.log"))
            urls = [server.url]
        problems = [p for u in urls if (p := reset_server(u, plan.reset, plan.reset_command))]
        entry["notes"] = problems
        entry |= _run_locust(plan, cell, server, prefix, cell_dir, stop)
    except ServerError as e:
        entry |= {"status": "failed", "error": str(e)}
    finally:
        if server is not None:
            if isinstance(server, Fleet) and "fleet" in entry:
                entry["fleet"] = server.describe()  # with the replicas lost during the cell
            server.stop()
    entry["seconds"] = round(time.monotonic() - t0, 1)
    if entry.get("status") == "ran":
        entry |= _report(plan, cell, prefix, cell_dir, on_report)
    if entry["status"] != "stopped":  # a stopped cell leaves no marker: --resume runs it again
        files.replace_atomically(os.path.join(cell_dir, MARKER), json.dumps(entry, indent=2, default=str))
    return entry


def _run_locust(plan: Plan, cell: Cell, server: Server | Fleet, prefix: str, cell_dir: str,
                stop: threading.Event) -> dict[str, Any]:
    log_path = os.path.join(cell_dir, "locust.log")
    fleet = server if isinstance(server, Fleet) else None
    env = {**os.environ, **({"LLMLOAD_API_KEY": fleet.api_key} if fleet and fleet.api_key else {})}
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(locust_command(plan, cell, server.url, prefix, fleet.metrics_urls if fleet else None),
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, env=env,
                                start_new_session=True)  # our signals, not the tty's
    budget = len(plan.load.steps) * plan.load.step_seconds + 120.0
    deadline = time.monotonic() + budget
    why = None
    while proc.poll() is None:
        if fleet is not None:  # a replica that died: the cell goes on with the rest (the report says so)
            fleet.notice_losses(time.time())
        if stop.is_set():
            why = "stopped"
        elif not server.alive():
            why = "server died"
        elif time.monotonic() > deadline:
            why = "timeout"
        if why:
            _end(proc)
            break
        stop.wait(0.25)
    if why == "stopped":
        return {"status": "stopped", "error": "the sweep was stopped (SIGINT/SIGTERM) during this cell"}
    if why == "server died":
        return {"status": "failed", "error": server.died_text()}
    if why == "timeout":
        return {"status": "failed", "error": f"locust ran longer than {budget:.0f} s; its log ({log_path}) ends:\n"
                                             + log_tail(log_path)}
    if proc.returncode not in (0, 1):  # 1: Locust saw failed requests, which the report judges
        return {"status": "failed", "error": f"locust exited {proc.returncode}; its log ({log_path}) ends:\n"
                                             + log_tail(log_path)}
    return {"status": "ran", "locust_exit": proc.returncode}


def _end(proc: subprocess.Popen) -> None:
    """SIGTERM: Locust stops its users and writes its CSVs; SIGKILL if it takes too long."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(LOCUST_GRACE_S)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
    except ProcessLookupError:
        proc.wait()


def _report(plan: Plan, cell: Cell, prefix: str, cell_dir: str,
            on_report: Callable[[Any, str], None] | None) -> dict[str, Any]:
    try:
        report = build_report(prefix, report_options(plan, cell))
        write_report(report, cell_dir)
    except (ReportError, ValueError, OSError) as e:
        return {"status": "failed", "error": f"no report: {e}"}
    if on_report is not None:
        on_report(report, cell.id)
    o = report.overall
    out = {"status": "done", "run_id": report.run_id, "capacity": o.capacity, "cost": o.cost, "plan": o.plan,
           "gpu": gpu_columns(report), "steps": [_step(s.data) for s in o.steps], "warnings": report.warnings,
           "prefix_cache": o.prefix_cache}
    if report.replicas is not None:  # a fleet: each replica from its own /metrics (llmload.report.sections.replicas)
        for step, w in zip(out["steps"], report.replicas["steps"], strict=True):
            step["replicas"] = w["replicas"]
            step["imbalance"], step["share_by"] = w["imbalance"], w["share_by"]
        out["replica_metrics"] = {k: report.replicas[k] for k in ("endpoints", "over_steps", "lost")}
    return out


def _step(d: dict[str, Any]) -> dict[str, Any]:
    """What the frontier and the fleet summary need of a report step."""
    return {"level": d["level"], "users": d["users"], "rps": d["rps"], "rps_ci95": d.get("rps_ci95"),
            "goodput_rps": d["goodput_rps"], "output_tps": d["output_tps"], "ok": d["ok"], "errors": d["errors"],
            "thin": d["thin"], "slo_met": d["slo_met"], "verdict": d.get("verdict"), "fleet_lost": d.get("fleet_lost"),
            "prefix_cache_hit_rate": (d.get("server") or {}).get("prefix_cache_hit_rate"),
            TTFT_P95: d["ttft_ms"]["p95"], TPOT_P95: d["tpot_ms"]["p95"], "ended": d.get("ended")}
