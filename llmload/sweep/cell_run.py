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
from llmload.sweep.frontier import TPOT_P95, TTFT_P95
from llmload.sweep.plan import Plan
from llmload.sweep.server import Server, ServerError, log_tail, reset_server

MARKER = "cell.json"
LOCUSTFILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "locustfile.py")
LOCUST_GRACE_S = 30.0  # after SIGTERM Locust writes its CSVs and stops its users (--stop-timeout 10)


def read_marker(cell_dir: str) -> dict[str, Any] | None:
    try:
        with open(os.path.join(cell_dir, MARKER), encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError):
        return None
    return data if isinstance(data, dict) else None


def locust_command(plan: Plan, cell: Cell, url: str, prefix: str) -> list[str]:
    load = plan.load
    return [sys.executable, "-m", "locust", "-f", LOCUSTFILE, "--headless", "--host", url, "--csv", prefix,
            "--steps", ",".join(map(str, load.steps)), "--step-seconds", f"{load.step_seconds:g}",
            *(["--step-precision", f"{load.step_precision:g}", "--step-warmup-s", f"{load.warmup_s:g}"]
              if load.step_precision else []),
            "--stop-timeout", "10", "--only-summary", "--no-server-metrics", *cell.workload.locust_args(),
            *[a for s in plan.slos for a in ("--slo", s.text())],
            *[a for u in cell.variant.deployment.gpu_metrics_urls(url) for a in ("--gpu-metrics", u)]]


def report_options(plan: Plan, cell: Cell) -> ReportOptions:
    d = cell.variant.deployment
    return ReportOptions(slos=list(plan.slos), warmup_s=plan.load.warmup_s, gpu_hourly_usd=d.gpu_hourly_usd,
                         gpus_per_replica=d.gpus, target_rps=plan.target_rps, headroom=plan.headroom,
                         usd_per_kwh=plan.usd_per_kwh)


def _cell_entry(cell: Cell) -> dict[str, Any]:
    d = cell.variant.deployment
    return {"id": cell.id, "deployment": cell.variant.id, "deployment_name": d.name, "params": cell.variant.params,
            "workload": cell.workload.name, "repeat": cell.repeat, "gpus": d.gpus,
            "gpu_hourly_usd": d.gpu_hourly_usd}


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
    server = None
    try:
        server = Server.start(cell.variant, os.path.join(cell_dir, "server.log"))
        problem = reset_server(server.url, plan.reset, plan.reset_command)
        entry["notes"] = [problem] if problem else []
        entry |= _run_locust(plan, cell, server, prefix, cell_dir, stop)
    except ServerError as e:
        entry |= {"status": "failed", "error": str(e)}
    finally:
        if server is not None:
            server.stop()
    entry["seconds"] = round(time.monotonic() - t0, 1)
    if entry.get("status") == "ran":
        entry |= _report(plan, cell, prefix, cell_dir, on_report)
    if entry["status"] != "stopped":  # a stopped cell leaves no marker: --resume runs it again
        files.replace_atomically(os.path.join(cell_dir, MARKER), json.dumps(entry, indent=2, default=str))
    return entry


def _run_locust(plan: Plan, cell: Cell, server: Server, prefix: str, cell_dir: str,
                stop: threading.Event) -> dict[str, Any]:
    log_path = os.path.join(cell_dir, "locust.log")
    with open(log_path, "ab") as log:
        proc = subprocess.Popen(locust_command(plan, cell, server.url, prefix), stdout=log, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)  # our signals, not the tty's
    budget = len(plan.load.steps) * plan.load.step_seconds + 120.0
    deadline = time.monotonic() + budget
    why = None
    while proc.poll() is None:
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
    return {"status": "done", "run_id": report.run_id, "capacity": o.capacity, "cost": o.cost, "plan": o.plan,
            "gpu": gpu_columns(report), "steps": [_step(s.data) for s in o.steps], "warnings": report.warnings}


def _step(d: dict[str, Any]) -> dict[str, Any]:
    """What the frontier needs of a report step."""
    return {"level": d["level"], "users": d["users"], "rps": d["rps"], "goodput_rps": d["goodput_rps"],
            "output_tps": d["output_tps"], "ok": d["ok"], "thin": d["thin"], "slo_met": d["slo_met"],
            TTFT_P95: d["ttft_ms"]["p95"], TPOT_P95: d["tpot_ms"]["p95"], "ended": d.get("ended")}
