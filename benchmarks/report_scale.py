"""`llmload report` on a large requests CSV: wall time and peak memory.

Writes a synthetic PREFIX_requests.csv (default 1,000,000 rows: 10 steps of a step load, 2
scenarios, ~1 % errors, cached tokens), then runs `llmload report` on it in a child process
and prints its wall time and peak RSS. Target: under 20 s and 2 GB.

    python benchmarks/report_scale.py [--rows 1000000] [--keep DIR]
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
import pandas as pd

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from llmload.metrics.record import CSV_COLUMNS  # noqa: E402


def make_csv(path: str, rows: int, seed: int = 1) -> None:
    rng = np.random.default_rng(seed)
    steps = 10
    users_levels = np.array([8, 16, 32, 48, 64, 96, 128, 160, 192, 256])
    step = np.sort(rng.integers(0, steps, rows))
    start = 1.8e9 + step * 120.0 + rng.uniform(0, 120.0, rows)
    order = np.argsort(start)
    start, step = start[order], step[order]
    users = users_levels[step]
    load = users / 64.0
    ttft = rng.lognormal(np.log(80 * (1 + load**2)), 0.4)
    tpot = rng.lognormal(np.log(12 * (1 + 0.3 * load)), 0.15)
    out_tok = rng.integers(64, 512, rows)
    e2e = ttft + tpot * (out_tok - 1)
    status = np.where(rng.random(rows) < 0.01, "timeout", "ok")
    scenario = np.where(rng.random(rows) < 0.5, "chat", "rag")
    prompt = rng.integers(200, 3000, rows)
    cached = np.where(scenario == "rag", (prompt * 0.6).astype(int), 0)
    df = pd.DataFrame({
        "request_id": [f"w0-{i}" for i in range(rows)], "start_time": np.round(start, 6), "scenario": scenario,
        "status": status, "http_status": 200, "ttft_ms": np.round(ttft, 3), "ttft_visible_ms": np.round(ttft, 3),
        "tpot_ms": np.round(tpot, 3), "e2e_ms": np.round(e2e, 3), "itl_max_ms": np.round(tpot * 3, 3),
        "prompt_tokens": prompt, "cached_tokens": cached, "completion_tokens": out_tok, "max_tokens": 512,
        "token_source": "usage", "finish_reason": "length", "users": users, "worker": 0, "session_id": "",
        "turn": "", "error": "",
    }).reindex(columns=list(CSV_COLUMNS))  # columns it does not fill stay empty
    df.to_csv(path, index=False)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--keep", help="write the CSV and report here instead of a temporary directory")
    args = ap.parse_args()
    d = args.keep or tempfile.mkdtemp()
    os.makedirs(d, exist_ok=True)
    prefix = os.path.join(d, "big")
    t = time.monotonic()
    make_csv(prefix + "_requests.csv", args.rows)
    size = os.path.getsize(prefix + "_requests.csv") / 1e6
    print(f"wrote {args.rows:,} rows ({size:.0f} MB) in {time.monotonic() - t:.1f} s")
    cmd = [sys.executable, "-m", "llmload.cli", "report", prefix, "--slo", "ttft_p95_ms=2000", "--slo",
           "tpot_p95_ms=50", "--gpu-hourly-usd", "4.5", "--target-rps", "40", "--out", os.path.join(d, "report")]
    t = time.monotonic()
    res = subprocess.run(cmd, capture_output=True, text=True, cwd=os.path.join(os.path.dirname(__file__), ".."))
    wall = time.monotonic() - t
    peak_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    print(res.stdout.strip())
    if res.returncode:
        print(res.stderr, file=sys.stderr)
        sys.exit(res.returncode)
    print(f"llmload report: {wall:.1f} s wall, peak RSS {peak_mb:.0f} MB (target: < 20 s, < 2048 MB)")


if __name__ == "__main__":
    main()
