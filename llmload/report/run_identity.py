"""Which run the report is of, and what it was: the run's ``PREFIX_run.json`` (written by
:mod:`llmload.plugin.output.run_manifest`) as the report reads it, when it is of the rows' run.

Usage::

    manifest, warnings = read_manifest("runs/chat", run_id="20261130T101500Z-3f9a1c")
    manifest_rows(manifest)        # [["run id", "..."], ["start → end", "..."], ...] for the header
    search_warmup(manifest)        # the shape's warm-up (search, SLO stop), for the report to use the same
    search_windows(manifest)       # where the search opened and closed each step's judged window
"""

from __future__ import annotations

import json
import os
from typing import Any

from llmload import files


def manifest_path(prefix: str) -> str:
    """``runs/chat`` (or ``runs/chat_requests.csv``, ``runs/chat_requests.worker0.csv``) → ``runs/chat_run.json``."""
    return files.path(files.prefix_of(prefix), files.MANIFEST)


def read_manifest(prefix: str, run_id: str | None) -> tuple[dict[str, Any] | None, list[str]]:
    """The manifest when it is of the rows' run; else None and, when one is there, why not used."""
    path = manifest_path(prefix)
    if run_id and os.path.exists(files.of_run(path, run_id)):  # an earlier test of a web-UI session
        path = files.of_run(path, run_id)
    if not os.path.exists(path):
        return None, ([f"{path}: missing; the run's identity (versions, command line, server) is unknown"]
                      if run_id else [])
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except (OSError, ValueError) as e:
        return None, [f"{path}: cannot read it ({e}); the run's identity is not shown"]
    if not isinstance(data, dict):
        return None, [f"{path}: expected a JSON object; the run's identity is not shown"]
    if run_id is None:
        return None, [f"{path} is of run {data.get('run_id')!r}, but the rows carry no run_id "
                      "(written before runs had ids): not shown"]
    if data.get("run_id") != run_id:
        return None, [f"{path} is of run {data.get('run_id')!r}, not of the rows' run {run_id!r}: not shown"]
    return data, []


def search_warmup(manifest: dict[str, Any] | None) -> float | None:
    """The warm-up the run's shape judged its steps after (the search, the step shape's SLO stop)."""
    shape = (manifest or {}).get("shape") or {}
    value = shape.get("warmup_s")
    return float(value) if isinstance(value, int | float) and not isinstance(value, bool) else None


def search_windows(manifest: dict[str, Any] | None) -> list[tuple[float, float, float]]:
    """(level, measured_from, judged_until) of every step the search judged, for the report to judge
    the same rows; [] for a run of another shape or one written before the search recorded them."""
    shape = (manifest or {}).get("shape") or {}
    out = []
    for p in (shape.get("steps") or []) if "search" in shape else []:
        got = [p.get(k) if isinstance(p, dict) else None for k in ("level", "measured_from", "judged_until")]
        if all(isinstance(v, int | float) for v in got):
            out.append((float(got[0]), float(got[1]), float(got[2])))
    return out


def _shape_text(shape: dict[str, Any]) -> str:
    iso = shape.get("isolation")
    if isinstance(iso, dict) and isinstance(iso.get("phases"), list):  # --isolation: its phases, not its plan's dict
        phases = ", ".join(f"{p.get('phase')} ({p.get('users')} users)" for p in iso["phases"] if isinstance(p, dict))
        return f"{shape.get('class', '?')}: {iso.get('seconds')} s per phase: {phases}"
    keep = {k: v for k, v in shape.items() if k not in ("class", "steps") or (k == "steps" and "search" not in shape)}
    text = f"{shape.get('class', '?')} " + ", ".join(f"{k}={v}" for k, v in keep.items() if k != "class")
    if "search" in shape and shape.get("steps"):
        path = " → ".join(f"{p['level']:g}{'✓' if p['passed'] else '✗'}" for p in shape["steps"])
        text += f"; steps: {path}"
    return text


def manifest_rows(m: dict[str, Any]) -> list[list[str]]:
    """Key/value rows for the report's header."""
    rows = [["run id", str(m.get("run_id"))],
            ["start → end (UTC)", f"{m.get('start')} → {m.get('end') or 'still running or killed'}"],
            ["llmload / Locust", f"{m.get('llmload_version')} / {m.get('locust_version')}"],
            ["host", str(m.get("host"))], ["model", str(m.get("model"))]]
    models = m.get("models")
    if isinstance(models, dict) and isinstance(models.get("data"), list):
        rows.append(["server's /v1/models", ", ".join(str(d.get("id")) for d in models["data"] if isinstance(d, dict))])
    elif isinstance(models, dict) and "error" in models:
        rows.append(["server's /v1/models", f"not read: {models['error']}"])
    for sc in m.get("scenarios") or []:
        rows.append(["scenario file", f"`{sc.get('file')}` (sha256 {str(sc.get('sha256', '?'))[:12]}…)"])
    rows += [["seed / workers", f"{m.get('seed')} / {m.get('workers')}"],
             ["stop timeout (s)", str(m.get("stop_timeout"))]]
    if m.get("shape"):
        rows.append(["shape", _shape_text(m["shape"])])
    rows.append(["command line", "`" + " ".join(m.get("command_line") or []) + "`"])
    return rows
