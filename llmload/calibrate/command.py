"""`llmload calibrate`: how much load one llmload process can drive on this machine before its own
numbers go wrong, and how many worker processes a target needs.

It starts `llmload mock` with the fixed profile (first token after ``--ttft-ms``, then one every
``--itl-ms``; every token's send time logged) on a core of its own when there is one, then runs
headless Locust with the user's prompt and reply lengths at a climbing stream count per process
(doubling; one step between the last good and the first bad count at the end; a bad step is run
once more before it counts, so that one preemption is not taken for a limit). Each step measures,
over its steady state: tokens/s, the load generators' CPU, the TTFT and ``itl_max_ms`` error
against the mock's log, the event-loop lag and stalls. A step is good when the TTFT error p99 is
at most ``TTFT_ERROR_P99_MS`` and no stall used more than ``STALL_MS`` of CPU (a stall the OS caused
is the machine's, and is reported apart). The result is written as JSON
(:mod:`llmload.health.calibration`): the client-limited verdict of later runs on this host uses it.

Usage::

    llmload calibrate --processes 1 --input-tokens 512 --output-tokens 128 --target-tps 100000
    result = calibrate(CalibrateSettings(...), say=print)
"""

from __future__ import annotations

import csv
import math
import os
import platform
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from typing import Any

from llmload import __version__, files
from llmload.calibrate import groundtruth
from llmload.calibrate.locust_run import LocustRun, process_cpu_s, run_locust, write_locustfile
from llmload.health.calibration import VERSION, default_path, save_calibration
from llmload.health.stalls import STALL_MS
from llmload.mock.launch import start_mock_process, stop_mock_process

TTFT_ERROR_P99_MS = 1.0
CLIMB = (32, 64, 128, 256, 512, 1024, 2048, 4096)
MOCK_SHORT = 0.9  # the mock delivered less than this share of the modelled tokens: it, not the client, limits
OTHERS_BUSY_PCT = 20.0  # other processes' CPU (% of a core; not the mock's, not Locust's) that makes a bad step
# the machine's


@dataclass
class CalibrateSettings:
    processes: int = 1
    input_tokens: str = "512"
    output_tokens: int = 128
    ttft_ms: float = 200.0
    itl_ms: float = 20.0
    step_seconds: float = 10.0  # the measured steady state of each step
    streams: tuple[int, ...] = CLIMB  # per process
    max_streams: int = 4096
    target_tps: float | None = None
    out: str = ""


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def _history(prefix: str, since_unix: float, until_unix: float) -> list[dict[str, str]]:
    try:
        with open(files.path(prefix, files.HISTORY), newline="") as f:
            return [h for h in csv.DictReader(f) if since_unix <= float(h["time"]) <= until_unix]
    except FileNotFoundError:
        return []


def _max(rows: list[dict[str, str]], key: str) -> float:
    return max((float(r[key]) for r in rows if r.get(key) not in (None, "")), default=0.0)


def measure_step(run: LocustRun, truth: dict[str, dict[str, Any]], s: CalibrateSettings, streams: int,
                 mock_cpu_pct: float) -> dict[str, Any]:
    """One step's figures over its steady state: from when every user has finished its first request
    until a second before the run time ran out."""
    request_s = (s.ttft_ms + (s.output_tokens - 1) * s.itl_ms) / 1000.0
    since = run.marks.get("spawned", run.t_launch) + request_s + 1.0
    until = run.marks.get("stop", since + s.step_seconds + 1.0) - 1.0
    span = max(until - since, 1e-6)
    to_unix = time.time() - time.monotonic()
    with open(files.path(run.prefix, files.REQUESTS), newline="") as f:
        errs = groundtruth.row_errors(csv.DictReader(f), truth, since + to_unix, until + to_unix)
    tps = groundtruth.tokens_between(groundtruth.token_times(truth), since, until) / span
    # A worker's health reaches the master every 3 s: skip the first report that may reach back.
    history = _history(run.prefix, since + to_unix + (5.0 if s.processes > 1 else 2.0), until + to_unix + 1.0)
    users = streams * s.processes
    step = {
        "streams": streams, "users": users, "seconds": round(span, 1), "tps": round(tps, 1),
        "tps_per_process": round(tps / s.processes, 1),
        "expected_tps": round(users * s.output_tokens / request_s, 1),
        "in_flight": round(groundtruth.streams_in_flight(truth, since, until), 1),
        "cpu_pct": round((run.cpu_at(until) - run.cpu_at(since)) / span * 100.0 / s.processes, 1),
        "mock_cpu_pct": round(mock_cpu_pct, 1),
        "requests": len(errs["ttft"]),
        "ttft_err_p50_ms": groundtruth.pct(errs["ttft"], 50), "ttft_err_p99_ms": groundtruth.pct(errs["ttft"], 99),
        "itl_max_err_p99_ms": groundtruth.pct([abs(x) for x in errs["itl_max"]], 99),
        "itl_max_off_2ms_share": (sum(abs(x) > 2.0 for x in errs["itl_max"]) / len(errs["itl_max"])
                                  if errs["itl_max"] else None),
        "lag_p99_ms": _max(history, "client_lag_p99_ms_max") if history else None,
        "stalls": int(sum(float(h.get("client_stalls") or 0) for h in history)) if history else None,
        "stall_cpu_max_ms": _max(history, "client_stall_cpu_max_ms") if history else None,
        "others_cpu_pct": run.others_cpu_pct(since, until),
        "load_average": round(run.load_end[0], 2),
    }
    step["ok"], step["why"] = judge(step)
    return step


def judge(step: dict[str, Any]) -> tuple[bool, str]:
    """Is the client's timing still exact at this step? (False, reason) when not. A mock that could
    not deliver the modelled tokens, or other processes on the client's cores, make a bad step say
    nothing about the client: after a preemption the loop catches up in one long turn, and a
    request sent late shows as TTFT error."""
    if step["requests"] == 0:
        return False, "no request finished in the steady state"
    if step["stall_cpu_max_ms"] is None:
        return False, "no client health report inside the steady state: use a longer --step-seconds"
    if step["tps"] < MOCK_SHORT * step["expected_tps"] and step["mock_cpu_pct"] >= 85.0:
        return False, f"mock-limited (mock CPU {step['mock_cpu_pct']:.0f} %)"
    bad = ""
    if step["ttft_err_p99_ms"] > TTFT_ERROR_P99_MS:
        bad = f"TTFT error p99 {step['ttft_err_p99_ms']:.2f} ms > {TTFT_ERROR_P99_MS:g} ms"
    elif step["stall_cpu_max_ms"] > STALL_MS:
        bad = f"an event-loop stall used {step['stall_cpu_max_ms']:.1f} ms of CPU"
    if bad and (step.get("others_cpu_pct") or 0.0) >= OTHERS_BUSY_PCT:
        return False, (f"machine busy: other processes used {step['others_cpu_pct']:.0f} % of a core meanwhile "
                       f"({bad})")
    return not bad, bad


def run_step(url: str, log_path: str, mock_pid: int, streams: int, s: CalibrateSettings, workdir: str,
             cpus: set[int] | None) -> dict[str, Any]:
    with open(log_path, "w"):
        pass  # this step's requests only
    request_s = (s.ttft_ms + (s.output_tokens - 1) * s.itl_ms) / 1000.0
    locustfile = write_locustfile(os.path.join(workdir, "calibrate_locustfile.py"), s.input_tokens, s.output_tokens)
    mock0 = process_cpu_s(mock_pid) or 0.0
    t0 = time.monotonic()
    # The verdict of these runs must not lean on an older calibration.
    run = run_locust(locustfile, url, streams * s.processes, math.ceil(2 * request_s + 3.0 + s.step_seconds),
                     s.processes, workdir, cpus, env={"LLMLOAD_CALIBRATION": os.path.join(workdir, "none.json")},
                     name=f"step{streams}", spawn_s=request_s, also=(mock_pid,))
    mock_cpu = ((process_cpu_s(mock_pid) or mock0) - mock0) / max(time.monotonic() - t0, 1e-6) * 100.0
    if run.returncode != 0:
        raise RuntimeError(f"locust exited with {run.returncode}: {''.join(run.output)[-2000:]}")
    return measure_step(run, groundtruth.read_truth(log_path), s, streams, mock_cpu)


def _plan(streams: tuple[int, ...], max_streams: int) -> list[int]:
    return sorted({n for n in streams if 0 < n <= max_streams})


def calibrate(s: CalibrateSettings, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Climb, print a line per step, write and return the result."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    mock_cpu = cores[-1] if len(cores) > s.processes else None  # a core of its own when there is one
    client_cpus = set(cores[:-1]) if mock_cpu is not None else None
    say(f"llmload calibrate: {s.processes} process(es), input {s.input_tokens} / output {s.output_tokens} tokens, "
        f"mock TTFT {s.ttft_ms:g} ms, ITL {s.itl_ms:g} ms; {len(cores)} cores ({_cpu_model()}); load average "
        f"{os.getloadavg()[0]:.2f}")
    say(HEADER)
    steps: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory(prefix="llmload-calibrate-") as workdir:
        log_path = os.path.join(workdir, "mock.jsonl")
        mock, url = start_mock_process(["--profile", "fixed", "--ttft-ms", str(s.ttft_ms), "--itl-ms", str(s.itl_ms),
                                        "--log", log_path, "--log-tokens"], cpu=mock_cpu)

        def step_at(streams: int) -> dict[str, Any]:
            step = run_step(url, log_path, mock.pid, streams, s, workdir, client_cpus)
            if not step["ok"] and not step["why"].startswith("mock"):  # once more: one preemption is no limit
                say(format_step(step) + " (once more)")
                step = run_step(url, log_path, mock.pid, streams, s, workdir, client_cpus)
                step["retried"] = True
            steps.append(step)
            say(format_step(step))
            return step

        try:
            good: dict[str, Any] | None = None
            for streams in _plan(s.streams, s.max_streams):
                step = step_at(streams)
                if step["ok"]:
                    good = step
                    continue
                mid = (good["streams"] + streams) // 2 if good is not None else streams // 2
                if _clients_fault(step) and mid not in {x["streams"] for x in steps} and mid > 0 \
                        and (good is None or mid > good["streams"]):
                    step_at(mid)
                break
        finally:
            stop_mock_process(mock)
    result = build_result(s, steps, cores)
    for line in summary_lines(result):
        say(line)
    path = s.out or default_path()
    save_calibration(result, path)
    say(f"wrote {path}")
    return result


def _clients_fault(step: dict[str, Any]) -> bool:
    return not step["ok"] and not step["why"].startswith(("mock", "machine"))


def build_result(s: CalibrateSettings, steps: list[dict[str, Any]], cores: list[int]) -> dict[str, Any]:
    good = [x for x in steps if x["ok"]]
    best = max(good, key=lambda x: x["tps_per_process"]) if good else None
    failed = [x for x in steps if not x["ok"]]
    client_failed = [x for x in failed if _clients_fault(x)]
    limited_by = ("client" if client_failed else "mock" if failed and failed[-1]["why"].startswith("mock")
                  else "machine" if failed else "highest step")
    per = {"max_tps": best["tps_per_process"] if best else 0.0, "max_streams": best["streams"] if best else 0,
           "limit_found": bool(client_failed), "limited_by": limited_by,
           "why": (client_failed or failed or [{"why": ""}])[0]["why"]}
    need = (math.ceil(s.target_tps / per["max_tps"]) if s.target_tps and per["max_tps"] > 0 else None)
    return {"version": VERSION, "host": socket.gethostname(), "cpu_model": _cpu_model(), "cores": len(cores),
            "llmload": __version__, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "criteria": {"ttft_err_p99_ms": TTFT_ERROR_P99_MS, "stall_cpu_ms": STALL_MS},
            "settings": {k: v for k, v in asdict(s).items() if k not in ("out", "streams")},
            "steps": steps, "per_process": per, "target_tps": s.target_tps, "processes_needed": need}


HEADER = (f"{'streams':>8}{'tok/s':>9}{'CPU %':>7}{'mock %':>7}{'TTFT err p50':>13}{'p99':>8}"
          f"{'itl_max err p99':>16}{'lag p99':>9}{'stalls':>7}{'CPU max':>8}  verdict")


def format_step(x: dict[str, Any]) -> str:
    def f(v: float | None, nd: int = 2) -> str:
        return "-" if v is None else f"{v:.{nd}f}"

    return (f"{x['streams']:>8}{x['tps_per_process']:>9,.0f}{x['cpu_pct']:>7.0f}{x['mock_cpu_pct']:>7.0f}"
            f"{f(x['ttft_err_p50_ms'], 3):>13}{f(x['ttft_err_p99_ms']):>8}{f(x['itl_max_err_p99_ms']):>16}"
            f"{f(x['lag_p99_ms'], 1):>9}{'-' if x['stalls'] is None else x['stalls']:>7}"
            f"{f(x['stall_cpu_max_ms'], 1):>8}  "
            + ("ok" if x["ok"] else x["why"]))


def summary_lines(r: dict[str, Any]) -> list[str]:
    per = r["per_process"]
    crit = f"TTFT error p99 <= {TTFT_ERROR_P99_MS:g} ms and no stall over {STALL_MS:g} ms of CPU"
    if per["max_streams"] == 0:
        lines = [f"no step met {crit} ({per['why']}); free the machine and run again"]
    else:
        bound = "" if per["limit_found"] else {
            "mock": " (a lower bound: the mock could not go faster)",
            "machine": " (a lower bound: other processes kept the client's cores busy; free the machine and "
                       "run again)"}.get(per["limited_by"], " (a lower bound: the highest step)")
        lines = [f"per process: {per['max_tps']:,.0f} tok/s at {per['max_streams']} streams with {crit}{bound}"]
        if per["limit_found"]:
            lines.append(f"above that: {per['why']}")
    if r["processes_needed"] is not None:
        n = r["processes_needed"]
        more = "" if n <= r["cores"] else f"; this machine has {r['cores']} cores: use more machines"
        lines.append(f"--target-tps {r['target_tps']:,.0f} needs {n} worker process(es) (--processes {n}){more}")
    return lines
