"""Helpers for the fleet tests: run `llmload sweep` on a plan, read what it wrote, and find any
process it left behind (every replica's and router's command line names the test's folder).

Usage::

    done, result = run_sweep(tmp_path, PLAN_TEXT)      # the CompletedProcess and sweep.json
    assert not processes_under(tmp_path)
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from tests.support.processes import ROOT

CLI = [sys.executable, "-m", "llmload.cli"]
MOCK = f"{sys.executable} -m llmload.cli mock --port {{port}}"


def env(tmp_path: Path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": ROOT, "LLMLOAD_ARCHIVE": str(tmp_path / "runs.sqlite")}


def write_plan(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "plan.yaml"
    path.write_text(text)
    return path


def run_sweep(tmp_path: Path, text: str, timeout: float = 300.0,
              extra_env: dict[str, str] | None = None) -> tuple[subprocess.CompletedProcess, dict[str, Any] | None]:
    plan = write_plan(tmp_path, text)
    out = tmp_path / "out"
    done = subprocess.run([*CLI, "sweep", str(plan), "--out", str(out), "--no-archive"], cwd=ROOT,
                          env={**env(tmp_path), **(extra_env or {})}, capture_output=True, text=True, timeout=timeout)
    path = out / "sweep.json"
    return done, json.loads(path.read_text()) if path.exists() else None


def processes_under(folder: Path) -> list[str]:
    """Live processes (not zombies, not this test's) whose command line names ``folder``, or whose
    working directory is inside it."""
    left = []
    mine = {os.getpid(), os.getppid()}
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) in mine:
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().replace(b"\0", b" ")
            with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if str(folder).encode() in cmd and b"pytest" not in cmd and state != "Z":
            left.append(f"{pid}: {cmd.decode(errors='replace')[:200]}")
    return left


def fleet_cell(result: dict[str, Any], replicas: int, policy: str | None, workload: str | None = None) -> dict:
    return next(c for c in result["cells"] if c.get("replicas") == replicas and c.get("policy") == policy
                and (workload is None or c["workload"] == workload))


def by_index(cell: dict[str, Any], per_endpoint: dict[str, Any]) -> dict[int, Any]:
    """A {metrics URL: value} map of a cell keyed by replica index instead."""
    index = {r["metrics_url"]: r["index"] for r in cell["fleet"]["replicas"]}
    return {index[e]: v for e, v in per_endpoint.items()}
