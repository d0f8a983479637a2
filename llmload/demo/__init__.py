"""`llmload demo`: the whole chain on the embedded default, no GPU needed.

Starts `llmload mock` (a 70B-on-2-GPUs profile) on a free port of 127.0.0.1, runs a headless
Locust step load against it (about 100 s), prints the LLM summary, then writes the capacity
report (SLOs and prices below, as a launch review might set them) and prints its summary.
Every process it starts is stopped when it ends, also on Ctrl-C.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

from llmload import files
from llmload.mock.launch import start_mock_process, stop_mock_process

DEMO_PROFILE = "llama3-70b-2xa100"
DEMO_STEPS = "8,16,32,48,64"
DEMO_STEP_SECONDS = 20  # > 3 × the longest mean E2E (about 5 s at 64 users) + the 4-s warm-up: no warning
DEMO_OUTPUT_TOKENS = 32
DEMO_SLOS = ("ttft_p95_ms=1000", "tpot_p95_ms=90")
DEMO_GPU_HOURLY_USD = 2.5
DEMO_GPUS_PER_REPLICA = 2
DEMO_TARGET_RPS = 20.0


def run_demo(out: str, profile: str = DEMO_PROFILE, steps: str = DEMO_STEPS,
             step_seconds: float = DEMO_STEP_SECONDS) -> int:
    os.makedirs(out, exist_ok=True)
    prefix = os.path.join(out, "run")
    for suffix in (files.REQUESTS, files.LLM_STATS, files.SERVER_METRICS):
        if os.path.exists(files.path(prefix, suffix)):
            os.remove(files.path(prefix, suffix))  # a fresh run, not appended to the last one
    mock, url = start_mock_process(["--profile", profile, "--log", os.path.join(out, "mock_log.jsonl")])
    print(f"llmload demo: mock server ({profile}) at {url}", flush=True)
    locustfile = os.path.join(os.path.dirname(os.path.abspath(__file__)), "locustfile.py")
    cmd = [sys.executable, "-m", "locust", "-f", locustfile, "--headless", "--host", url, "--csv", prefix,
           "--steps", steps, "--step-seconds", str(step_seconds), "--ignore-eos",
           "--output-tokens", str(DEMO_OUTPUT_TOKENS), "--input-tokens", "200-400", "--stop-timeout", "15",
           "--only-summary"]
    print("llmload demo: " + " ".join(cmd[2:]), flush=True)
    t0 = time.monotonic()
    try:
        rc = subprocess.call(cmd)
    except KeyboardInterrupt:
        rc = 130
    finally:
        stop_mock_process(mock)
    print(f"llmload demo: load test finished in {time.monotonic() - t0:.0f} s (exit {rc})")
    print(f"llmload demo: per-request rows in {files.path(prefix, files.REQUESTS)}, summary in "
          f"{files.path(prefix, files.LLM_STATS)}")
    if rc != 0:
        return rc
    return write_demo_report(prefix, out)


def write_demo_report(prefix: str, out: str) -> int:
    from llmload.report import ReportError, ReportOptions, build_report, parse_slo, write_report
    from llmload.report.render import summary_text

    opts = ReportOptions(slos=[parse_slo(s) for s in DEMO_SLOS], warmup_s=4.0, gpu_hourly_usd=DEMO_GPU_HOURLY_USD,
                         gpus_per_replica=DEMO_GPUS_PER_REPLICA, target_rps=DEMO_TARGET_RPS)
    try:
        report = build_report(prefix, opts)
        paths = write_report(report, out)
    except ReportError as e:
        print(f"llmload demo: no report: {e}", file=sys.stderr)
        return 2
    print(f"llmload demo: SLOs {', '.join(DEMO_SLOS)}; ${DEMO_GPU_HOURLY_USD}/GPU-hour, "
          f"{DEMO_GPUS_PER_REPLICA} GPUs per replica, target {DEMO_TARGET_RPS:g} req/s")
    print(summary_text(report))
    print(f"llmload demo: report in {paths[2]}")
    return 0
