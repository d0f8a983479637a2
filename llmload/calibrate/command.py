"""`llmload calibrate`: how much load one llmload process can drive on this machine while its
numbers stay within the user's tolerances, and how many worker processes a target needs.

It starts `llmload mock` with the fixed profile (first token after ``--ttft-ms``, then one every
``--itl-ms``; every token's send time logged), pinned to a core of its own when there are two or
more (the load generators on the others; the mock's CPU is measured apart, never as the client's).
Then it brackets, bisects and confirms the limit (:mod:`llmload.calibrate.climb`), each step run
``--repeats`` times and judged on the medians against the tolerances
(:mod:`llmload.calibrate.tolerance`). The result, with the curve (:mod:`llmload.calibrate.curve`),
is written as JSON (read by the client-limited verdict of later runs on this host,
:mod:`llmload.health.calibration`) and as an HTML page beside it (:mod:`llmload.calibrate.page`).
With ``--processes N`` the N processes are calibrated together, and one process at the same
streams says whether they scale.

Usage::

    llmload calibrate --ttft-error-ms 1 --itl-max-error-ms 2 --share 0.99 --target-tps 100000
    result = calibrate(CalibrateSettings(...), say=print)
"""

from __future__ import annotations

import math
import os
import platform
import socket
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict
from typing import Any

from llmload import __version__, files
from llmload.calibrate.climb import Climb
from llmload.calibrate.curve import curve
from llmload.calibrate.page import render_page
from llmload.calibrate.step import CalibrateSettings, run_repeat
from llmload.calibrate.tolerance import Tolerances, combine, is_clients_fault, judge
from llmload.health.calibration import VERSION, default_path, save_calibration
from llmload.mock.launch import start_mock_process, stop_mock_process

__all__ = ["CalibrateSettings", "Tolerances", "build_result", "calibrate", "format_step", "summary_lines"]

MAX_SET_ASIDE = 3  # repeats per step that failed while the machine was busy, run again instead of counted
SCALES_SHARE = 0.9  # N processes scale when each streams at least this share of what one alone streams


def _cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def cause_of(step: dict[str, Any]) -> str:
    """Why a step failed: "client", "mock" or "machine" (the climb stops on the last two)."""
    return "client" if is_clients_fault(step) else "mock" if step["why"].startswith("mock") else "machine"


def plan_of(s: CalibrateSettings) -> list[int]:
    return sorted({n for n in s.streams if 0 < n <= s.max_streams}) or [min(s.max_streams, min(s.streams))]


def calibrate(s: CalibrateSettings, say: Callable[[str], None] = print) -> dict[str, Any]:
    """Bracket, bisect and confirm, print a line per step, write and return the result."""
    cores = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else list(range(os.cpu_count() or 1))
    mock_cpu = cores[-1] if len(cores) >= 2 else None  # a core of its own whenever there are two
    client_cpus = set(cores[:-1]) if mock_cpu is not None else None
    say(f"llmload calibrate: {s.processes} process(es) on {len(client_cpus or cores)} core(s), the mock "
        f"{'on a core of its own' if mock_cpu is not None else 'sharing the only core'}; input {s.input_tokens} / "
        f"output {s.output_tokens} tokens, mock TTFT {s.ttft_ms:g} ms, ITL {s.itl_ms:g} ms; {len(cores)} cores "
        f"({_cpu_model()}); load average {os.getloadavg()[0]:.2f}")
    say(f"tolerances: {s.tolerances.describe()}; {s.repeats} repeat(s) of {s.step_seconds:g} s per step (medians)")
    say(HEADER)
    steps: list[dict[str, Any]] = []
    scaling: dict[str, Any] | None = None
    t_start = time.monotonic()
    climb = Climb(plan_of(s))
    with tempfile.TemporaryDirectory(prefix="llmload-calibrate-") as workdir:
        log_path = os.path.join(workdir, "mock.jsonl")
        mock, url = start_mock_process(["--profile", "fixed", "--ttft-ms", str(s.ttft_ms), "--itl-ms", str(s.itl_ms),
                                        "--log", log_path, "--log-tokens"], cpu=mock_cpu)

        def step_at(streams: int, kind: str, processes: int | None = None) -> dict[str, Any]:
            runs: list[dict[str, Any]] = []
            set_aside: list[dict[str, Any]] = []
            while len(runs) < s.repeats:
                run = run_repeat(url, log_path, mock.pid, streams, s, workdir, client_cpus, processes)
                ok, why = judge(run, s.tolerances)
                if not ok and why.startswith("machine") and len(set_aside) < MAX_SET_ASIDE:
                    # other processes had the client's cores: this repeat says nothing of the client
                    set_aside.append(run)
                    say(f"{streams:>8} (a repeat set aside, run again: {why})")
                    continue
                runs.append(run)
            step = {**combine(runs), "kind": kind, "runs": runs, "set_aside": set_aside}
            step["ok"], step["why"] = judge(step, s.tolerances)
            say(format_step(step))
            return step

        try:
            while (streams := climb.next_level()) is not None:
                step = step_at(streams, climb.next_kind)
                steps.append(step)
                climb.record(step["ok"], cause_of(step) if not step["ok"] else "client")
            if s.processes > 1 and climb.limit > 0:
                one = step_at(climb.limit, "one process", processes=1)
                scaling = scaling_of(steps, one, climb.limit, s.processes)
        finally:
            stop_mock_process(mock)
    result = build_result(s, steps, cores, climb.describe(), scaling)
    result["seconds"] = round(time.monotonic() - t_start, 1)
    result["summary"] = summary_lines(result)
    for line in result["summary"]:
        say(line)
    path = s.out or default_path()
    save_calibration(result, path)
    files.replace_atomically(files.calibration_page(path), render_page(result))
    say(f"wrote {path} and {files.calibration_page(path)} ({result['seconds']:.0f} s)")
    return result


def scaling_of(steps: list[dict[str, Any]], one: dict[str, Any], streams: int, processes: int) -> dict[str, Any]:
    """N processes at ``streams`` each against one process alone at the same streams."""
    together = [x for x in steps if x["streams"] == streams]
    per = together[-1]["tps_per_process"] if together else 0.0
    alone = one["tps_per_process"] or 0.0
    share = per / alone if alone > 0 else 0.0
    return {"streams": streams, "processes": processes, "tps_per_process_together": per,
            "tps_one_process": alone, "share": round(share, 3), "scales": share >= SCALES_SHARE,
            "one_process_step": {k: v for k, v in one.items() if k != "runs"}}


def build_result(s: CalibrateSettings, steps: list[dict[str, Any]], cores: list[int], climb: dict[str, Any],
                 scaling: dict[str, Any] | None = None) -> dict[str, Any]:
    points = curve(steps, s.tolerances)
    at_limit = [p for p in points if p["streams"] == climb["limit"]]
    limit_tps = at_limit[0]["tps_per_process"] if at_limit and climb["limit"] > 0 else 0.0
    failed = [x for x in steps if not x["ok"]]
    why = next((x["why"] for x in failed if x["streams"] > climb["limit"]), "")
    per = {"max_tps": limit_tps or 0.0, "max_streams": climb["limit"], "limit_found": climb["limit_found"],
           "limited_by": climb["limited_by"], "confirmed": climb["confirmed"], "why": why}
    need = (math.ceil(s.target_tps / per["max_tps"]) if s.target_tps and per["max_tps"] > 0 else None)
    settings = {k: v for k, v in asdict(s).items() if k not in ("out", "tolerances")}
    return {"version": VERSION, "host": socket.gethostname(), "cpu_model": _cpu_model(), "cores": len(cores),
            "llmload": __version__, "measured_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "tolerances": s.tolerances.to_dict(), "tolerance": s.tolerances.describe(),
            "settings": settings, "steps": steps, "curve": points, "climb": climb["levels"], "per_process": per,
            "scaling": scaling, "target_tps": s.target_tps, "processes_needed": need}


HEADER = (f"{'streams':>8} {'kind':<8}{'tok/s':>9}{'CPU %':>7}{'mock %':>7}{'TTFT err p99':>13}"
          f"{'itl_max err p99':>16}{'in tol.':>9}{'spread':>15}{'lag p99':>8}{'stalls':>7}{'CPU max':>8}"
          f"{'coal.':>7}  verdict")


def format_step(x: dict[str, Any]) -> str:
    def f(v: float | None, nd: int = 2) -> str:
        return "-" if v is None else f"{v:.{nd}f}"

    sp = x.get("spread", {}).get("share")
    spread = f"{sp[0] * 100:.1f}-{sp[1] * 100:.1f} %" if sp else "-"
    share = "-" if x.get("share") is None else f"{x['share'] * 100:.2f} %"
    coal = "-" if x.get("coalesced_share") is None else f"{x['coalesced_share'] * 100:.1f}%"
    return (f"{x['streams']:>8} {x.get('kind', ''):<8.8}{x['tps_per_process']:>9,.0f}{x['cpu_pct']:>7.0f}"
            f"{x['mock_cpu_pct']:>7.0f}{f(x['ttft_err_p99_ms'], 3):>13}{f(x['itl_max_err_p99_ms'], 3):>16}"
            f"{share:>9}{spread:>15}{f(x['lag_p99_ms'], 1):>8}"
            f"{'-' if x['stalls'] is None else int(x['stalls']):>7}{f(x['stall_cpu_max_ms'], 1):>8}{coal:>7}  "
            + ("ok" if x["ok"] else x["why"]))


def summary_lines(r: dict[str, Any]) -> list[str]:
    per = r["per_process"]
    crit = r["tolerance"]
    if per["max_streams"] == 0:
        lines = [f"no step met {crit} ({per['why'] or 'see the steps'}); free the machine and run again"]
    else:
        bound = "" if per["limit_found"] else {
            "mock": " (a lower bound: the mock could not go faster)",
            "machine": " (a lower bound: other processes kept the client's cores busy; free the machine and "
                       "run again)"}.get(per["limited_by"], " (a lower bound: the highest step)")
        lines = [f"per process: {per['max_tps']:,.0f} tok/s at {per['max_streams']} streams with {crit}{bound}"]
        if per["confirmed"] is False:
            lines.append("NOT confirmed: the confirmation run at the limit failed; the machine is noisy, run again")
        if per["limit_found"] and per["why"]:
            lines.append(f"above that: {per['why']}")
    sc = r.get("scaling")
    if sc:
        lines.append(f"--processes {sc['processes']}: {sc['tps_per_process_together']:,.0f} tok/s per process "
                     f"together at {sc['streams']} streams each, {sc['share'] * 100:.0f} % of one process alone "
                     f"({sc['tps_one_process']:,.0f} tok/s): " + ("they scale" if sc["scales"] else
                                                                   "they do NOT scale (shared cores?)"))
    if r["processes_needed"] is not None:
        n = r["processes_needed"]
        more = "" if n <= r["cores"] else f"; this machine has {r['cores']} cores: use more machines"
        lines.append(f"--target-tps {r['target_tps']:,.0f} needs {n} worker process(es) (--processes {n}){more}")
    return lines
