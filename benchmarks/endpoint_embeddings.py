"""Requests per client CPU-second for embeddings: llmload's ``LLMEmbeddingsUser`` (a new batch of
unique texts per request, the answer read whole and every vector checked, the row, the stats)
beside Locust's own ``FastHttpUser`` posting the same-sized body (read, not checked), one after the
other in one run, against the mock as a fixed-latency server (each embedding step 1 ms, whatever
its tokens). Client on CPU 0, the mock on CPU 1. Steady state only: each process's CPU
(/proc/PID/stat) and its requests (Locust's PREFIX_stats_history.csv, cumulative, once a second)
between ``--warmup`` seconds after start and 1 s before its end, so start-up (imports, llmload's
text corpus) is not counted.

    python benchmarks/endpoint_embeddings.py [--users 16] [--seconds 15] [--warmup 5] [--batch 8]
                                            [--input-tokens 64] [--rounds 2] [--dim 384]
"""

from __future__ import annotations

import argparse
import csv
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from llmload.mock.launch import start_mock_process, stop_mock_process  # noqa: E402

LLMLOAD_USER = '''
from llmload import LLMEmbeddingsUser

class Embed(LLMEmbeddingsUser):
    batch_size = {batch}
    input_tokens = {tokens}
    model = "mock"
'''

FAST_HTTP_USER = '''
import json
from locust import FastHttpUser, task, constant

BODY = json.dumps({{"model": "mock", "input": [" ".join(f"w{{i}}x{{j}}" for j in range({tokens}))
                                               for i in range({batch})], "encoding_format": "float"}})

class Embed(FastHttpUser):
    wait_time = constant(0)

    @task
    def embed(self):
        self.client.post("/v1/embeddings", data=BODY, headers={{"Content-Type": "application/json"}})
'''


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def requests_at(history: Path, when: float) -> int:
    """Locust's cumulative request count at the last history row written before ``when`` (Unix time)."""
    with open(history) as f:
        rows = [r for r in csv.DictReader(f) if r["Name"] == "Aggregated" and float(r["Timestamp"]) <= when]
    return int(rows[-1]["Total Request Count"]) if rows else 0


def run_locust(locustfile: Path, host: str, users: int, seconds: int, warmup: int,
               prefix: Path) -> tuple[int, float]:
    """(requests, client CPU seconds) in the steady state of one headless Locust process on CPU 0."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    cmd = [sys.executable, "-m", "locust", "-f", str(locustfile), "--host", host, "--headless", "-u", str(users),
           "-r", str(users), "-t", f"{seconds}s", "--csv", str(prefix), "--csv-full-history", "--only-summary",
           "--stop-timeout", "5"]
    with open(f"{prefix}.log", "w") as log:
        proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=log,
                                preexec_fn=lambda: os.sched_setaffinity(0, {0}))
        time.sleep(warmup)
        t1, c1 = time.time(), cpu_seconds(proc.pid)
        time.sleep(seconds - warmup - 1)
        t2, c2 = time.time(), cpu_seconds(proc.pid)
        proc.wait()
    stderr = Path(f"{prefix}.log").read_text()
    history = Path(f"{prefix}_stats_history.csv")
    # the history rows are a second apart: take the rows at the window's ends, and the CPU over the same span
    n1, n2 = requests_at(history, t1), requests_at(history, t2)
    with open(f"{prefix}_stats.csv") as f:
        total = next(r for r in csv.DictReader(f) if r["Name"] == "Aggregated")
    requests, failures = int(total["Request Count"]), int(total["Failure Count"])
    if failures or not requests or n2 <= n1:
        raise SystemExit(f"{locustfile.name}: {requests} requests, {failures} failures\n{stderr[-2000:]}")
    return n2 - n1, c2 - c1


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", type=int, default=16)
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--input-tokens", type=int, default=64)
    ap.add_argument("--dim", type=int, default=384)
    ap.add_argument("--rounds", type=int, default=2, help="alternate the two users this many times each")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        d = Path(tmp)
        files = {"llmload LLMEmbeddingsUser": d / "llmload_embed.py", "Locust FastHttpUser": d / "fasthttp_embed.py"}
        files["llmload LLMEmbeddingsUser"].write_text(LLMLOAD_USER.format(batch=args.batch, tokens=args.input_tokens))
        files["Locust FastHttpUser"].write_text(FAST_HTTP_USER.format(batch=args.batch, tokens=args.input_tokens))
        mock, url = start_mock_process(["--profile", "fixed", "--embed-base-ms", "1", "--embed-per-token-ms", "0",
                                        "--embed-dim", str(args.dim)], cwd=str(ROOT))
        try:
            os.sched_setaffinity(mock.pid, {1})
            totals = {name: [0, 0.0] for name in files}
            for r in range(args.rounds):
                for name, path in files.items():
                    n, cpu = run_locust(path, url, args.users, args.seconds, args.warmup, d / f"{path.stem}{r}")
                    totals[name][0] += n
                    totals[name][1] += cpu
                    print(f"round {r + 1} {name:28s} {n:7d} requests {cpu:6.2f} CPU-s {n / cpu:8.0f} req/CPU-s",
                          flush=True)
                    time.sleep(1)
        finally:
            stop_mock_process(mock)
    rate = {name: n / cpu for name, (n, cpu) in totals.items()}
    ours, theirs = rate["llmload LLMEmbeddingsUser"], rate["Locust FastHttpUser"]
    print(f"\n{args.users} users, batches of {args.batch} x {args.input_tokens} tokens, {args.dim} dims, "
          f"{args.rounds} x {args.seconds} s each, steady state after {args.warmup} s")
    for name, value in rate.items():
        print(f"{name:28s} {value:8.0f} requests per client CPU-second")
    print(f"llmload / FastHttpUser: {ours / theirs:.1%} (target >= 90 %)")


if __name__ == "__main__":
    main()
