"""`llmload demo`: the whole chain on the embedded default, no GPU needed.

Starts `llmload mock` (a 70B-on-2-GPUs profile) on a free port of 127.0.0.1, runs a headless
Locust step load against it (about a minute), then prints the LLM summary and where the CSVs
are. Every process it starts is stopped when it ends, also on Ctrl-C.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time

DEMO_PROFILE = "llama3-70b-2xa100"
DEMO_STEPS = "8,16,32,48,64"
DEMO_STEP_SECONDS = 12


def start_mock(profile: str, log_path: str | None = None) -> tuple[subprocess.Popen, str]:
    cmd = [sys.executable, "-m", "llmload.cli", "mock", "--profile", profile, "--port", "0"]
    if log_path:
        cmd += ["--log", log_path]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if "listening on" not in line:
        proc.kill()
        raise RuntimeError(f"llmload demo: the mock server did not start: {line.strip()}")
    return proc, line.rsplit(" ", 1)[1].strip()


def run_demo(out: str, profile: str = DEMO_PROFILE, steps: str = DEMO_STEPS,
             step_seconds: float = DEMO_STEP_SECONDS) -> int:
    os.makedirs(out, exist_ok=True)
    prefix = os.path.join(out, "run")
    for suffix in ("_requests.csv", "_llm_stats.csv"):
        if os.path.exists(prefix + suffix):
            os.remove(prefix + suffix)  # a fresh run, not appended to the last one
    mock, url = start_mock(profile, os.path.join(out, "mock_log.jsonl"))
    print(f"llmload demo: mock server ({profile}) at {url}", flush=True)
    locustfile = os.path.join(os.path.dirname(os.path.abspath(__file__)), "demo_locustfile.py")
    cmd = [sys.executable, "-m", "locust", "-f", locustfile, "--headless", "--host", url, "--csv", prefix,
           "--steps", steps, "--step-seconds", str(step_seconds), "--ignore-eos", "--output-tokens", "64",
           "--input-tokens", "200-400", "--stop-timeout", "15", "--only-summary"]
    print("llmload demo: " + " ".join(cmd[2:]), flush=True)
    t0 = time.monotonic()
    try:
        rc = subprocess.call(cmd)
    except KeyboardInterrupt:
        rc = 130
    finally:
        mock.terminate()
        try:
            mock.wait(10)
        except subprocess.TimeoutExpired:
            mock.kill()
    print(f"llmload demo: load test finished in {time.monotonic() - t0:.0f} s (exit {rc})")
    print(f"llmload demo: per-request rows in {prefix}_requests.csv, summary in {prefix}_llm_stats.csv")
    return rc
