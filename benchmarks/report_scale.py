"""`llmload report` on a large requests CSV: wall time and peak memory.

Writes a synthetic PREFIX_requests.csv with every column of llmload/files.py REQUESTS_COLUMNS
(N rows, default 1,000,000: 10 steps of a step load, 2 scenarios, 4 workers, ~0.5 % errors, cached
tokens, one run id), in chunks of 500,000 rows so that writing 10 M rows holds only a chunk, then
runs `llmload report` on it in a child process and prints its wall time and peak RSS
(getrusage of the child). Target (issue 20): 10 M rows in under 60 s and under 4 GB.

    python benchmarks/report_scale.py [N] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np
import pandas as pd

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from llmload.files import REQUESTS, REQUESTS_COLUMNS  # noqa: E402

CHUNK = 500_000
STEPS = 10
STEP_S = 120.0
USERS = np.array([8, 16, 32, 48, 64, 96, 128, 160, 192, 256])
T0 = 1.8e9
RUN_ID = "r20261201-bench"


def chunk_frame(first: int, count: int, total: int, rng: np.random.Generator) -> pd.DataFrame:
    """Rows ``first .. first + count`` of ``total``, in start-time order across chunks."""
    i = np.arange(first, first + count)
    offset = (i + rng.uniform(0, 1, count)) / total * STEPS * STEP_S
    step = np.minimum((offset // STEP_S).astype(int), STEPS - 1)
    users = USERS[step]
    load = users / 64.0
    ttft = rng.lognormal(np.log(80 * (1 + load**2)), 0.4)
    tpot = rng.lognormal(np.log(12 * (1 + 0.3 * load)), 0.15)
    out_tok = rng.integers(64, 512, count)
    e2e = ttft + tpot * (out_tok - 1)
    failed = rng.random(count) < 0.005
    scenario = np.where(rng.random(count) < 0.5, "chat", "rag")
    prompt = rng.integers(200, 3000, count)
    worker = rng.integers(0, 4, count)
    df = pd.DataFrame({
        "request_id": pd.Series(i).map(lambda n: f"w{n % 4}a{n:x}-{n}"), "start_time": np.round(T0 + offset, 6),
        "scenario": scenario, "status": np.where(failed, "timeout", "ok"),
        "http_status": 200, "ttft_ms": np.round(ttft, 3), "ttft_visible_ms": np.round(ttft, 3),
        "tpot_ms": np.round(tpot, 3), "e2e_ms": np.round(e2e, 3), "itl_max_ms": np.round(tpot * 3, 3),
        "prompt_tokens": prompt, "cached_tokens": np.where(scenario == "rag", (prompt * 0.6).astype(int), 0),
        "completion_tokens": out_tok, "max_tokens": 512, "token_source": "usage",
        "finish_reason": np.where(failed, "", "length"), "users": users, "worker": worker, "session_id": "",
        "turn": "", "error": np.where(failed, "read timeout after 60 s", ""), "requested_input_tokens": prompt,
        "run_id": RUN_ID, "coalesced_reads": rng.integers(0, 3, count), "step_kind": "", "backoff_ms": 0,
    })
    return df.reindex(columns=list(REQUESTS_COLUMNS))  # the columns it does not fill stay empty


def make_csv(path: str, rows: int, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    with open(path, "w", encoding="utf-8", newline="") as f:
        for first in range(0, rows, CHUNK):
            chunk_frame(first, min(CHUNK, rows - first), rows, rng).to_csv(f, index=False, header=first == 0)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("rows", nargs="?", type=int, default=1_000_000, help="rows to write (default 1,000,000)")
    ap.add_argument("--rows", dest="rows_flag", type=int, help=argparse.SUPPRESS)  # the old spelling
    ap.add_argument("--keep", help="write the CSV and report here instead of a temporary directory")
    args = ap.parse_args()
    rows = args.rows_flag or args.rows
    d = args.keep or tempfile.mkdtemp(prefix="llmload-report-scale-")
    os.makedirs(d, exist_ok=True)
    prefix = os.path.join(d, "big")
    try:
        t = time.monotonic()
        make_csv(prefix + REQUESTS, rows)
        size = os.path.getsize(prefix + REQUESTS) / 1e6
        print(f"wrote {rows:,} rows ({size:,.0f} MB) in {time.monotonic() - t:.1f} s")
        cmd = [sys.executable, "-m", "llmload.cli", "report", prefix, "--slo", "ttft_p95_ms=2000", "--slo",
               "tpot_p95_ms=50", "--gpu-hourly-usd", "4.5", "--target-rps", "40", "--out", os.path.join(d, "report"),
               "--no-archive"]
        t = time.monotonic()
        res = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
        wall = time.monotonic() - t
        child = resource.getrusage(resource.RUSAGE_CHILDREN)
        peak_mb, cpu_s = child.ru_maxrss / 1024, child.ru_utime + child.ru_stime  # CPU: what a shared host skews least
        print(res.stdout.strip())
        if res.returncode:
            print(res.stderr, file=sys.stderr)
            sys.exit(res.returncode)
        print(f"llmload report on {rows:,} rows: {wall:.1f} s wall, {cpu_s:.1f} s CPU, peak RSS {peak_mb:,.0f} MB "
              f"(target for 10 M rows: < 60 s, < 4096 MB); load average {os.getloadavg()[0]:.1f} on "
              f"{os.cpu_count()} CPUs")
    finally:
        if not args.keep:
            shutil.rmtree(d, ignore_errors=True)


if __name__ == "__main__":
    main()
