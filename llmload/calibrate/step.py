"""One repeat of one calibration step: a headless Locust run against the mock, held against the
mock's log over its steady state (from when every user has finished its first request until a
second before the run time ran out).

Usage::

    repeat = run_repeat(url, log_path, mock_pid, streams=256, s=settings, workdir=d, cpus={0})
    repeat["tps_per_process"], repeat["share"], repeat["lag_p99_ms"], repeat["coalesced_share"]
"""

from __future__ import annotations

import csv
import math
import os
import time
from dataclasses import dataclass, field
from typing import Any

from llmload import files
from llmload.calibrate import groundtruth
from llmload.calibrate.locust_run import LocustRun, process_cpu_s, run_locust, write_locustfile
from llmload.calibrate.tolerance import Tolerances, accuracy

CLIMB = (32, 64, 128, 256, 512, 1024, 2048, 4096)


@dataclass
class CalibrateSettings:
    processes: int = 1
    input_tokens: str = "512"
    output_tokens: int = 128
    ttft_ms: float = 200.0
    itl_ms: float = 20.0
    step_seconds: float = 10.0  # the measured steady state of each repeat
    streams: tuple[int, ...] = CLIMB  # per process: the bracket's plan
    max_streams: int = 4096
    repeats: int = 3
    tolerances: Tolerances = field(default_factory=Tolerances)
    target_tps: float | None = None
    out: str = ""

    @property
    def request_s(self) -> float:
        return (self.ttft_ms + (self.output_tokens - 1) * self.itl_ms) / 1000.0


def _history(prefix: str, since_unix: float, until_unix: float) -> list[dict[str, str]]:
    try:
        with open(files.path(prefix, files.HISTORY), newline="") as f:
            return [h for h in csv.DictReader(f) if since_unix <= float(h["time"]) <= until_unix]
    except FileNotFoundError:
        return []


def _max(rows: list[dict[str, str]], key: str) -> float:
    return max((float(r[key]) for r in rows if r.get(key) not in (None, "")), default=0.0)


def measure_repeat(run: LocustRun, truth: dict[str, dict[str, Any]], s: CalibrateSettings, streams: int,
                   processes: int, mock_cpu_pct: float) -> dict[str, Any]:
    """One repeat's figures over its steady state."""
    since = run.marks.get("spawned", run.t_launch) + s.request_s + 1.0
    until = run.marks.get("stop", since + s.step_seconds + 1.0) - 1.0
    span = max(until - since, 1e-6)
    to_unix = time.time() - time.monotonic()
    with open(files.path(run.prefix, files.REQUESTS), newline="") as f:
        errs = groundtruth.row_errors(csv.DictReader(f), truth, since + to_unix, until + to_unix)
    tps = groundtruth.tokens_between(groundtruth.token_times(truth), since, until) / span
    # A worker's health reaches the master every 3 s: skip the first report that may reach back.
    history = _history(run.prefix, since + to_unix + (5.0 if processes > 1 else 2.0), until + to_unix + 1.0)
    users = streams * processes
    return {
        "streams": streams, "users": users, "processes": processes, "seconds": round(span, 1),
        "tps": round(tps, 1), "tps_per_process": round(tps / processes, 1),
        "expected_tps": round(users * s.output_tokens / s.request_s, 1),
        "in_flight": round(groundtruth.streams_in_flight(truth, since, until), 1),
        # the load generators' CPU only: the mock's is apart (mock_cpu_pct), never the client's
        "cpu_pct": round((run.cpu_at(until) - run.cpu_at(since)) / span * 100.0 / processes, 1),
        "mock_cpu_pct": round(mock_cpu_pct, 1),
        **accuracy(errs["pairs"], s.tolerances),
        "coalesced_share": round(errs["coalesced_reads"] / errs["tokens"], 5) if errs["tokens"] else None,
        "lag_p99_ms": _max(history, "client_lag_p99_ms_max") if history else None,
        "stalls": int(sum(float(h.get("client_stalls") or 0) for h in history)) if history else None,
        "stall_cpu_max_ms": _max(history, "client_stall_cpu_max_ms") if history else None,
        "others_cpu_pct": run.others_cpu_pct(since, until),
        "load_average": round(run.load_end[0], 2),
    }


def run_repeat(url: str, log_path: str, mock_pid: int, streams: int, s: CalibrateSettings, workdir: str,
               cpus: set[int] | None, processes: int | None = None) -> dict[str, Any]:
    """One headless Locust run of ``streams`` per process (``processes``, default the settings')."""
    processes = processes or s.processes
    with open(log_path, "w"):
        pass  # this repeat's requests only
    locustfile = write_locustfile(os.path.join(workdir, "calibrate_locustfile.py"), s.input_tokens, s.output_tokens)
    mock0 = process_cpu_s(mock_pid) or 0.0
    t0 = time.monotonic()
    # The verdict of these runs must not lean on an older calibration.
    run = run_locust(locustfile, url, streams * processes, math.ceil(2 * s.request_s + 3.0 + s.step_seconds),
                     processes, workdir, cpus, env={"LLMLOAD_CALIBRATION": os.path.join(workdir, "none.json")},
                     name=f"step{streams}", spawn_s=s.request_s, also=(mock_pid,))
    mock_cpu = ((process_cpu_s(mock_pid) or mock0) - mock0) / max(time.monotonic() - t0, 1e-6) * 100.0
    if run.returncode != 0:
        raise RuntimeError(f"locust exited with {run.returncode}: {''.join(run.output)[-2000:]}")
    return measure_repeat(run, groundtruth.read_truth(log_path), s, streams, processes, mock_cpu)
