"""Soak: a long distributed run at moderate load; does any process grow?

A headless ``locust --processes 2`` run (a master and two worker processes) of
``locustfiles/chat.py`` against ``llmload mock`` (fixed engine) for ``--minutes`` (default 30).
Prints each process's resident memory (RSS) after a warm-up and at the end, the growth in %, the
trend sampled every minute, and the bytes of ``PREFIX_requests.csv`` per request row. The target:
under 5 % growth per process over 30 minutes.

Usage::

    .venv/bin/python benchmarks/soak.py                      # 30 minutes
    .venv/bin/python benchmarks/soak.py --minutes 3 --users 16 --out /tmp/soak
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from llmload.mock.launch import start_mock_process, stop_mock_process  # noqa: E402

WARMUP_S = 60.0
SAMPLE_S = 60.0


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def count_rows(path: str) -> int:
    if not os.path.exists(path):
        return 0
    with open(path, "rb") as f:
        return max(0, sum(1 for _ in f) - 1)


def rss_mb(proc: psutil.Process) -> float:
    try:
        return proc.memory_info().rss / 1e6
    except psutil.Error:
        return float("nan")


def processes(master: subprocess.Popen) -> dict[str, psutil.Process]:
    """The master and its worker processes (Locust forks them for --processes)."""
    m = psutil.Process(master.pid)
    kids = sorted(m.children(recursive=False), key=lambda p: p.pid)
    return {"master": m, **{f"worker{i}": p for i, p in enumerate(kids)}}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--users", type=int, default=32)
    ap.add_argument("--out", default=None, help="directory for the CSVs and logs (default: a temporary one)")
    a = ap.parse_args()
    out = a.out or tempfile.mkdtemp(prefix="llmload-soak-")
    os.makedirs(out, exist_ok=True)
    prefix = os.path.join(out, "soak")
    run_s = int(a.minutes * 60)
    mock, url = start_mock_process(["--profile", "fixed", "--ttft-ms", "50", "--itl-ms", "10"], cwd=ROOT)
    env = {**os.environ, "PYTHONPATH": ROOT}
    port = free_port()
    # A port of its own: Locust's default (5557) would take in workers of any other run on this machine.
    cmd = [sys.executable, "-m", "locust", "-f", os.path.join(ROOT, "locustfiles", "chat.py"), "--headless",
           "--processes", "2", "--master-bind-port", str(port), "--master-port", str(port),
           "-u", str(a.users), "-r", str(a.users), "-t", f"{run_s}s", "--host", url,
           "--csv", prefix, "--input-tokens", "100-300", "--output-tokens", "64", "--ignore-eos",
           "--stop-timeout", "10"]
    log = open(os.path.join(out, "locust.log"), "w")  # noqa: SIM115
    t0 = time.monotonic()
    master = subprocess.Popen(cmd, cwd=out, env=env, stdout=log, stderr=subprocess.STDOUT)
    try:
        time.sleep(WARMUP_S)
        procs = processes(master)
        start = {name: rss_mb(p) for name, p in procs.items()}
        mock_ps = psutil.Process(mock.pid)
        start["mock"] = rss_mb(mock_ps)
        print(f"soak: {a.users} users, {a.minutes:g} min, 2 worker processes; out {out}", flush=True)
        print("after warm-up (MB RSS): " + ", ".join(f"{k} {v:.1f}" for k, v in start.items()), flush=True)
        last = dict(start)
        end_at = t0 + run_s - 5.0  # the last sample just before the run ends
        while time.monotonic() < end_at and master.poll() is None:
            time.sleep(min(SAMPLE_S, max(0.0, end_at - time.monotonic())))
            last = {name: rss_mb(p) for name, p in procs.items()}
            last["mock"] = rss_mb(mock_ps)
            rows = count_rows(f"{prefix}_requests.csv")
            print(f"  {time.monotonic() - t0:6.0f} s: " + ", ".join(f"{k} {v:.1f}" for k, v in last.items())
                  + f"; {rows} rows", flush=True)
        rc = master.wait(timeout=120)
    finally:
        if master.poll() is None:
            master.terminate()
            master.wait(30)
        stop_mock_process(mock)
        log.close()
    size = os.path.getsize(f"{prefix}_requests.csv")
    rows = count_rows(f"{prefix}_requests.csv")
    print(f"\nlocust exit code {rc}; {rows} request rows, {size / 1e6:.1f} MB: {size / max(rows, 1):.0f} bytes per "
          "request row")
    print(f"{'process':<10}{'start MB':>10}{'end MB':>10}{'growth':>9}")
    worst = 0.0
    for name in start:
        growth = (last[name] - start[name]) / start[name] * 100 if start[name] else float("nan")
        if name != "mock":
            worst = max(worst, growth)
        print(f"{name:<10}{start[name]:>10.1f}{last[name]:>10.1f}{growth:>8.1f}%")
    print(f"largest growth of a Locust process: {worst:.1f} % (target < 5 %)")
    if a.out is None:
        shutil.rmtree(out, ignore_errors=True)
    return 0 if rc in (0, 1) else rc


if __name__ == "__main__":
    sys.exit(main())
