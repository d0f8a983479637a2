"""``llmload sweep PLAN.yaml --out DIR [--resume] [--dry-run]``: every cell in turn, then the report.

Before the first cell, every deployment's serve: command is checked (its program on PATH, or an
executable file): one that cannot start fails the sweep at once (exit 2), naming the command, and
no cell runs. A cell that fails (its server does not start or dies, Locust fails, no report) is
recorded as failed with the reason and the sweep moves on. SIGINT or SIGTERM stop the current cell: Locust gets
SIGTERM (it writes its CSVs), the server's process group is killed, the cell leaves no finished
marker, the report is written for the cells done so far, and the command exits 130 (143 for
SIGTERM). ``--resume`` skips the cells whose ``cell.json`` says done; failed ones run again.

Usage::

    rc = run_sweep(SweepSettings(plan_path="sweep.yaml", out="runs/sweep", resume=True))
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from dataclasses import dataclass
from typing import Any

from llmload.report.compare.archive import Archive, ArchiveError, created_note
from llmload.sweep.cell_run import read_marker, run_cell
from llmload.sweep.cells import dry_run_text, expand
from llmload.sweep.fleet.routers import install_problem
from llmload.sweep.plan import PlanError, read_plan
from llmload.sweep.report import cell_line, summary_text, sweep_summary, write_sweep_report
from llmload.sweep.server import cannot_start


@dataclass
class SweepSettings:
    plan_path: str
    out: str
    resume: bool = False
    dry_run: bool = False
    archive: str | None = None  # the SQLite archive each finished cell is added to; None: none


def _say(text: str) -> None:
    print(f"llmload sweep: {text}", flush=True)


def run_sweep(s: SweepSettings) -> int:
    try:
        plan = read_plan(s.plan_path)
    except PlanError as e:
        print(f"llmload sweep: {e}", file=sys.stderr)
        return 2
    for d in plan.deployments:  # one line before anything starts: a router that is not there
        problem = install_problem(d.fleet.router) if d.fleet else None
        if problem and not s.dry_run:
            print(f"llmload sweep: {plan.path}: deployments.{d.name}.router: {problem}", file=sys.stderr)
            return 2
    cells = expand(plan)
    if s.dry_run:
        print(dry_run_text(plan))
        for v in {c.variant.id: c.variant for c in cells}.values():
            if (problem := cannot_start(v)) is not None:
                print(f"note: on this machine, {problem}")
        return 0
    cells_dir = os.path.join(s.out, "cells")
    done_before = {c.id: m for c in cells if (m := read_marker(os.path.join(cells_dir, c.id)))}
    if done_before and not s.resume:
        print(f"llmload sweep: {s.out} already has {len(done_before)} finished cell(s); pass --resume to keep them "
              "and run the rest, or give a new --out", file=sys.stderr)
        return 2
    to_run = {c.variant.id: c.variant for c in cells if (done_before.get(c.id) or {}).get("status") != "done"}
    problems = list(dict.fromkeys(p for v in to_run.values() if (p := cannot_start(v))))
    if problems:
        for p in problems:
            print(f"llmload sweep: {s.plan_path}: {p}", file=sys.stderr)
        print("llmload sweep: no cell was run; fix the serve: command(s) above", file=sys.stderr)
        return 2
    os.makedirs(cells_dir, exist_ok=True)
    try:
        archive = Archive.open(s.archive) if s.archive else None
    except ArchiveError as e:
        print(f"llmload sweep: {e}", file=sys.stderr)
        return 2
    if archive is not None and archive.created:
        print(created_note("sweep", archive.path), flush=True)
    on_report = None
    if archive is not None:
        def on_report(report: Any, cell_id: str) -> None:
            archive.add(report, source="sweep", sweep=os.path.abspath(s.out), cell=cell_id)
    stop = threading.Event()
    caught: list[int] = []

    def on_signal(sig: int, _frame: Any) -> None:
        caught.append(sig)
        stop.set()

    old = {sig: signal.signal(sig, on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
    results: list[dict[str, Any]] = []
    try:
        for i, cell in enumerate(cells, 1):
            marker = done_before.get(cell.id)
            if marker and marker.get("status") == "done":
                _say(f"[{i}/{len(cells)}] {cell.id}: done before, skipped (--resume)")
                results.append(marker)
                continue
            if stop.is_set():
                break
            _say(f"[{i}/{len(cells)}] {cell.id}: {cell.workload.name} on {cell.variant.id}")
            result = run_cell(plan, cell, os.path.join(cells_dir, cell.id), stop, on_report)
            _say(cell_line(i, len(cells), cell.id, result))
            if result["status"] == "stopped":
                break
            results.append(result)
    finally:
        if archive is not None:
            archive.db.close()
        for sig, handler in old.items():
            signal.signal(sig, handler)
    summary = sweep_summary(plan, results)
    paths = write_sweep_report(summary, s.out)
    print(summary_text(summary))
    _say("wrote " + ", ".join(paths))
    if caught:
        _say(f"stopped by signal {caught[0]}; finished cells are kept: rerun with --resume to run the rest")
        return 128 + caught[0]
    return 0 if all(r["status"] == "done" for r in results) else 1
