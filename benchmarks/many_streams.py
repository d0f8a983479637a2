"""10,000 concurrent streams in one Locust process: memory per stream and timing error.

The mock (fixed profile: first token after 1 s, then one every 500 ms) runs on CPU 0; one headless
Locust process with N users (each streaming one request at a time, closed loop) on CPU 1. Prints:

* RSS of the Locust process with 100 users and with N users once every user is streaming, and
  their difference per stream (the target is ≤ 25 KB);
* TTFT error against the mock's log over the run's steady state: the client's time of the first
  token (t0 + TTFT) − the mock's kernel send time of it, p50/p99/max;
* rows, statuses, coalesced reads and the client's CPU.

    python benchmarks/many_streams.py                 # 10,000 streams
    python benchmarks/many_streams.py --users 2000 --seconds 30
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

import numpy as np
import pandas as pd

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from llmload.mock.launch import start_mock_process, stop_mock_process  # noqa: E402

LOCUSTFILE = """from llmload import LLMUser


class StreamUser(LLMUser):
    scenario = "many"
    input_tokens = 16
    output_tokens = {output_tokens}
    ignore_eos = True
"""


def rss_kb(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    return 0


def cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        parts = f.read().rsplit(")", 1)[1].split()
    return (int(parts[11]) + int(parts[12])) / os.sysconf("SC_CLK_TCK")


def measure(url: str, users: int, seconds: float, output_tokens: int, tmp: str, log_path: str) -> dict:
    path = os.path.join(tmp, f"many_{users}.py")
    with open(path, "w") as f:
        f.write(LOCUSTFILE.format(output_tokens=output_tokens))
    prefix = os.path.join(tmp, f"run{users}")
    rate = max(users / 10, 50)  # everyone streaming within ~10 s
    cmd = [sys.executable, "-m", "locust", "-f", path, "--host", url, "--headless", "-u", str(users), "-r",
           str(rate), "-t", f"{seconds:.0f}s", "--csv", prefix, "--stop-timeout", "30", "--only-summary"]
    if (os.cpu_count() or 1) > 1:
        cmd = ["taskset", "-c", "1", *cmd]
    env = {**os.environ, "PYTHONPATH": ROOT}
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    ramp_s = users / rate + 3.0  # started, connected, and each one's first request in flight
    samples = []
    t_start = time.monotonic()
    while proc.poll() is None and time.monotonic() - t_start < seconds + 60:
        elapsed = time.monotonic() - t_start
        if ramp_s < elapsed < seconds - 2:
            samples.append((rss_kb(proc.pid), cpu_s(proc.pid), time.monotonic()))
        time.sleep(1.0)
    out, _ = proc.communicate(timeout=120)
    rows = pd.read_csv(f"{prefix}_requests.csv", keep_default_na=False, na_values=[""])
    truth = {}
    with open(log_path) as f:
        for line in f:
            e = json.loads(line)
            truth[e["request_id"]] = e
    ok = rows[rows["status"] == "ok"]
    t_end_steady = rows["start_time"].min() + seconds - 5
    steady = ok[(ok["start_time"] > rows["start_time"].min() + ramp_s) & (ok["start_time"] < t_end_steady)]
    errs = []
    for r in steady.itertuples():
        e = truth.get(r.request_id)
        if e and e.get("first_token_mono"):
            errs.append(r.ttft_ms - (e["first_token_mono"] - e["arrival_mono"]) * 1000.0)
    rss = [s[0] for s in samples]
    cpu = (samples[-1][1] - samples[0][1]) / (samples[-1][2] - samples[0][2]) * 100 if len(samples) > 1 else None
    return {"users": users, "rss_kb": max(rss) if rss else None, "rows": len(rows),
            "statuses": rows["status"].value_counts().to_dict(), "coalesced_reads": int(rows["coalesced_reads"].sum()),
            "ttft_err_ms": np.percentile(errs, [50, 99, 100]).round(3).tolist() if errs else None,
            "steady_requests": len(errs), "cpu_pct": None if cpu is None else round(cpu, 1),
            "tail": out[-600:] if proc.returncode else ""}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--users", type=int, default=10_000)
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--output-tokens", type=int, default=20)
    ap.add_argument("--keep", metavar="DIR", help="write the runs' CSVs and the mock's log here and keep them")
    args = ap.parse_args()
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    need = args.users * 2 + 1024  # the client's and the mock's sockets
    if soft < need:
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(need, hard), hard))
    with tempfile.TemporaryDirectory() as scratch:
        tmp = args.keep or scratch
        os.makedirs(tmp, exist_ok=True)
        log_path = os.path.join(tmp, "mock.jsonl")
        mock, url = start_mock_process(["--profile", "fixed", "--ttft-ms", "1000", "--itl-ms", "500", "--log",
                                        log_path], cpu=0)
        try:
            base = measure(url, 100, 25, args.output_tokens, tmp, log_path)
            big = measure(url, args.users, args.seconds, args.output_tokens, tmp, log_path)
        finally:
            stop_mock_process(mock)
    for r in (base, big):
        print(json.dumps({k: v for k, v in r.items() if k != "tail"}))
        if r["tail"]:
            print(r["tail"])
    if base["rss_kb"] and big["rss_kb"]:
        per = (big["rss_kb"] - base["rss_kb"]) * 1024 / (args.users - 100)
        print(f"RSS: {base['rss_kb'] / 1024:.0f} MB at 100 streams, {big['rss_kb'] / 1024:.0f} MB at {args.users}: "
              f"{per / 1024:.1f} KB per stream (target ≤ 25 KB)")
    if big["ttft_err_ms"]:
        p50, p99, mx = big["ttft_err_ms"]
        print(f"TTFT error at {args.users} streams: p50 {p50} ms, p99 {p99} ms, max {mx} ms "
              f"({big['steady_requests']} requests; target p99 ≤ 5 ms)")


if __name__ == "__main__":
    main()
