"""A real `locust --headless` process against `llmload mock`: tokens per client CPU-second, end to end.

The mock (fixed profile: first token after 200 ms, one token every 20 ms, 128 output tokens, 512
prompt tokens; `--log-tokens`) runs pinned to CPU 0, Locust pinned to CPU 1 with llmload's
defaults (fast transport, `--csv`, Locust's own stats printer). While it runs, this script samples
the Locust process's CPU time every 0.25 s; the mock's per-token log says how many tokens left in
any interval (both are CLOCK_MONOTONIC). It prints, per user count:

* start-up: process start until every user has finished its first request (imports, spawning,
  connecting), its CPU-seconds;
* steady state: from then until one second before the run time ends, tokens per client CPU-second
  and streams actually in flight;
* whole run (start-up and stop included): tokens per client CPU-second (CPU from wait4);
* accuracy against the mock's log: TTFT error (client TTFT − server first-token send time after
  arrival) and `itl_max_ms` error (client − the true largest gap between token send times);
* the client's own event-loop stall line (`client: ...` from the run's summary) and the load
  average at the start and the end (other work on the machine makes every figure noisy).

    python benchmarks/locust_end_to_end.py                       # 256 and 1,024 users, 30 s each
    python benchmarks/locust_end_to_end.py --users 1024 --seconds 20
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from llmload.mock.launch import start_mock_process, stop_mock_process  # noqa: E402

LOCUSTFILE = '''
from llmload import LLMUser


class BenchUser(LLMUser):
    input_tokens = {input_tokens}
    output_tokens = {output_tokens}
    ignore_eos = True
'''


def cpu_seconds(pid: int) -> float | None:
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def cpu_at(samples: list[tuple[float, float]], t: float) -> float:
    """The process's CPU seconds at monotonic time t, linearly between the two nearest samples."""
    times = [s[0] for s in samples]
    return float(np.interp(t, times, [s[1] for s in samples]))


def run_once(users: int, seconds: float, itl_ms: float, ttft_ms: float, input_tokens: int, output_tokens: int,
             workdir: str) -> dict:
    log_path = os.path.join(workdir, f"truth-{users}.jsonl")
    lf = os.path.join(workdir, "bench_locustfile.py")
    with open(lf, "w") as f:
        f.write(LOCUSTFILE.format(input_tokens=input_tokens, output_tokens=output_tokens))
    mock, url = start_mock_process(["--profile", "fixed", "--ttft-ms", str(ttft_ms), "--itl-ms", str(itl_ms),
                                    "--log", log_path, "--log-tokens"], cpu=0, cwd=ROOT)
    prefix = os.path.join(workdir, f"run{users}")
    cmd = [sys.executable, "-m", "locust", "-f", lf, "--headless", "-u", str(users), "-r", str(users), "-t",
           f"{seconds:g}s", "--host", url, "--csv", prefix, "--stop-timeout", "10"]
    if (os.cpu_count() or 1) > 1:
        cmd = ["taskset", "-c", "1", *cmd]
    load_start = os.getloadavg()
    env = {**os.environ, "PYTHONPATH": ROOT}
    t_launch = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env, cwd=workdir)
    samples: list[tuple[float, float]] = [(t_launch, 0.0)]
    marks: dict[str, float] = {}
    output: list[str] = []

    def read_output() -> None:
        assert proc.stdout is not None
        for line in proc.stdout:
            output.append(line)
            if "All users spawned" in line and "spawned" not in marks:
                marks["spawned"] = time.monotonic()
            if "limit reached" in line and "stop" not in marks:
                marks["stop"] = time.monotonic()

    reader = threading.Thread(target=read_output, daemon=True)
    reader.start()
    rusage = None
    deadline = t_launch + seconds + 120
    while time.monotonic() < deadline:
        pid, status, ru = os.wait4(proc.pid, os.WNOHANG)
        if pid:
            proc.returncode = os.waitstatus_to_exitcode(status)
            rusage = ru
            break
        c = cpu_seconds(proc.pid)
        if c is not None:
            samples.append((time.monotonic(), c))
        time.sleep(0.25)
    else:
        proc.kill()
        raise RuntimeError("locust did not finish in time")
    reader.join(5)
    load_end = os.getloadavg()
    stop_mock_process(mock)
    if proc.returncode != 0 or rusage is None:
        raise RuntimeError(f"locust exited with {proc.returncode}:\n{''.join(output)[-3000:]}")
    with open(log_path) as f:
        truth = {e["request_id"]: e for e in map(json.loads, f)}
    with open(f"{prefix}_requests.csv", newline="") as f:
        rows = list(csv.DictReader(f))

    tokens = np.sort(np.concatenate([np.asarray(e["token_mono"] or [], dtype=float) for e in truth.values()]))
    request_s = (ttft_ms + (output_tokens - 1) * itl_ms) / 1000.0
    spawned = marks.get("spawned", t_launch)
    steady_from = spawned + request_s + 1.0
    steady_to = marks.get("stop", t_launch + seconds) - 1.0
    out: dict = {"users": users, "load_start": load_start, "load_end": load_end,
                 "whole_cpu_s": rusage.ru_utime + rusage.ru_stime, "whole_tokens": int(len(tokens)),
                 "startup_s": steady_from - t_launch, "startup_cpu_s": cpu_at(samples, steady_from)}
    out["whole_tok_per_cpu_s"] = out["whole_tokens"] / out["whole_cpu_s"]
    if steady_to > steady_from + 1:
        n = int(np.searchsorted(tokens, steady_to) - np.searchsorted(tokens, steady_from))
        cpu = cpu_at(samples, steady_to) - cpu_at(samples, steady_from)
        span = steady_to - steady_from
        in_flight = sum(max(0.0, min(e["last_token_mono"] or e["arrival_mono"], steady_to) - max(e["arrival_mono"],
                        steady_from)) for e in truth.values()) / span
        out.update(steady_s=span, steady_tokens=n, steady_cpu_s=cpu, steady_tps=n / span,
                   steady_tok_per_cpu_s=n / cpu if cpu > 0 else float("nan"), in_flight=in_flight)
    ttft_err, itl_err = [], []
    for r in rows:
        e = truth.get(r["request_id"])
        if r["status"] != "ok" or not e or not e["token_mono"]:
            continue
        ttft_err.append(float(r["ttft_ms"]) - (e["first_token_mono"] - e["arrival_mono"]) * 1000)
        if r["itl_max_ms"]:
            true_max = float(np.max(np.diff(e["token_mono"]))) * 1000 if len(e["token_mono"]) > 1 else 0.0
            itl_err.append(float(r["itl_max_ms"]) - true_max)
    out["ttft_err_ms"] = [float(np.percentile(ttft_err, q)) for q in (50, 99)] if ttft_err else None
    out["itl_max_err_ms"] = [float(np.percentile(itl_err, q)) for q in (50, 99)] if itl_err else None
    out["itl_max_off_2ms"] = float(np.mean(np.abs(itl_err) > 2.0)) if itl_err else None
    out["requests_ok"] = len(ttft_err)
    out["stalls"] = next((line.strip() for line in output if line.startswith("client: ")), "")
    # The client's own history: stalls of each 2-s interval inside the steady state.
    to_unix = time.time() - time.monotonic()
    with open(f"{prefix}_llm_history.csv", newline="") as f:
        hist = [h for h in csv.DictReader(f) if steady_from + 2 <= float(h["time"]) - to_unix <= steady_to + 1]
    num = lambda h, k: float(h[k]) if h.get(k) not in (None, "") else 0.0  # noqa: E731
    out["steady_stalls"] = {"intervals": len(hist), "stalls": int(sum(num(h, "client_stalls") for h in hist)),
                            "max_ms": max((num(h, "client_stall_max_ms") for h in hist), default=0.0),
                            "max_cpu_ms": max((num(h, "client_stall_cpu_max_ms") for h in hist), default=0.0)}
    out["limited"] = next((line.strip()[:300] for line in output if line.startswith("CLIENT-LIMITED")), "")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", default="256,1024")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--itl-ms", type=float, default=20.0)
    ap.add_argument("--ttft-ms", type=float, default=200.0)
    ap.add_argument("--input-tokens", type=int, default=512)
    ap.add_argument("--output-tokens", type=int, default=128)
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = ap.parse_args()
    results = []
    for users in (int(u) for u in args.users.split(",")):
        with tempfile.TemporaryDirectory() as d:
            r = run_once(users, args.seconds, args.itl_ms, args.ttft_ms, args.input_tokens, args.output_tokens, d)
        results.append(r)
        f = lambda v, nd=1: "-" if v is None else f"{v:,.{nd}f}"  # noqa: E731
        print(f"users {users}: load average {r['load_start'][0]:.2f} at start, {r['load_end'][0]:.2f} at end")
        print(f"  start-up      {r['startup_s']:.1f} s, {r['startup_cpu_s']:.2f} CPU-s")
        if "steady_s" in r:
            print(f"  steady state  {r['steady_s']:.1f} s: {f(r['steady_tps'], 0)} tok/s, {f(r['in_flight'], 0)} "
                  f"streams in flight, {r['steady_cpu_s']:.2f} CPU-s, {f(r['steady_tok_per_cpu_s'], 0)} tokens per "
                  "client CPU-second")
        print(f"  whole run     {r['whole_tokens']:,} tokens, {r['whole_cpu_s']:.2f} CPU-s, "
              f"{f(r['whole_tok_per_cpu_s'], 0)} tokens per client CPU-second")
        if r["ttft_err_ms"]:
            print(f"  accuracy      {r['requests_ok']} ok requests: TTFT error p50 {r['ttft_err_ms'][0]:.3f} ms, "
                  f"p99 {r['ttft_err_ms'][1]:.3f} ms; itl_max error p50 {r['itl_max_err_ms'][0]:.3f} ms, "
                  f"p99 {r['itl_max_err_ms'][1]:.3f} ms, {r['itl_max_off_2ms'] * 100:.1f} % of requests off by > 2 ms")
        st = r["steady_stalls"]
        print(f"  steady-state loop stalls over 2 ms: {st['stalls']} in {st['intervals']} intervals of 2 s, longest "
              f"{st['max_ms']:.1f} ms, at most {st['max_cpu_ms']:.1f} ms of it CPU")
        print(f"  whole run: {r['stalls'] or 'client: (no stall line)'}")
        if r["limited"]:
            print(f"  {r['limited']}")
        sys.stdout.flush()
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)


if __name__ == "__main__":
    main()
