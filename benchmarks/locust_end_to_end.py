"""A real `locust --headless` process against `llmload mock`: tokens per client CPU-second, end to end.

The mock (fixed profile: first token after 200 ms, one token every 20 ms, 128 output tokens, 512
prompt tokens; `--log-tokens`) runs pinned to CPU 0, Locust pinned to CPU 1 with llmload's
defaults (fast transport, `--csv`, Locust's own stats printer). While it runs, the Locust process's
CPU time is sampled every 0.25 s (llmload/calibrate/locust_run.py); the mock's per-token log says how many
tokens left in any interval (both are CLOCK_MONOTONIC). It prints, per user count:

* start-up: process start until every user has finished its first request and a second more
  (imports, spawning over one request's duration, connecting, the first requests), and its
  CPU-seconds;
* steady state: from then until one second before the run time ends: tokens/s, streams actually
  in flight, tokens per client CPU-second;
* whole run (start-up and stop included): tokens per client CPU-second (CPU from wait4);
* accuracy against the mock's log (llmload/calibrate/groundtruth.py): TTFT error and `itl_max_ms` error,
  and the share of steady-state requests within the tolerances (`--ttft-error-ms`, `--itl-max-error-ms`,
  `--share`, as `llmload calibrate`'s; `--calibration FILE` takes them and the user count from a
  calibration: its limit), and whether that share meets `--share`;
* the client's event-loop stalls over 2 ms in the steady state (its PREFIX_llm_history.csv) and
  over the whole run (the summary's `client:` line), with the load average at the start and the end:
  other work on the machine makes every figure noisy.

    python benchmarks/locust_end_to_end.py                       # 256 and 1,024 users, 30 s each
    python benchmarks/locust_end_to_end.py --users 1024 --seconds 20
    python benchmarks/locust_end_to_end.py --calibration ~/.cache/llmload/calibration.json   # at its limit
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import tempfile
import time

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from llmload.calibrate import groundtruth as gt  # noqa: E402
from llmload.calibrate.locust_run import run_locust, write_locustfile  # noqa: E402
from llmload.calibrate.tolerance import Tolerances, accuracy  # noqa: E402
from llmload.mock.launch import start_mock_process, stop_mock_process  # noqa: E402


def run_once(users: int, seconds: float, itl_ms: float, ttft_ms: float, input_tokens: int, output_tokens: int,
             workdir: str, spread: bool = True, tol: Tolerances | None = None) -> dict:
    log_path = os.path.join(workdir, f"truth-{users}.jsonl")
    lf = write_locustfile(os.path.join(workdir, "bench_locustfile.py"), input_tokens, output_tokens)
    two_cores = (os.cpu_count() or 1) > 1
    request_s = (ttft_ms + (output_tokens - 1) * itl_ms) / 1000.0
    spawn_s = request_s if spread else 1.0
    mock, url = start_mock_process(["--profile", "fixed", "--ttft-ms", str(ttft_ms), "--itl-ms", str(itl_ms),
                                    "--log", log_path, "--log-tokens"], cpu=0, cwd=ROOT)
    try:
        run = run_locust(lf, url, users, seconds, 1, workdir, {1} if two_cores else None,
                         env={"PYTHONPATH": ROOT, "LLMLOAD_CALIBRATION": os.path.join(workdir, "none.json")},
                         name=f"run{users}", spawn_s=spawn_s)
    finally:
        stop_mock_process(mock)
    if run.returncode != 0:
        raise RuntimeError(f"locust exited with {run.returncode}:\n{''.join(run.output)[-3000:]}")
    truth = gt.read_truth(log_path)
    tokens = gt.token_times(truth)
    steady_from = run.marks.get("spawned", run.t_launch) + request_s + 1.0
    steady_to = run.marks.get("stop", run.t_launch + seconds) - 1.0
    out: dict = {"users": users, "load_start": run.load_start, "load_end": run.load_end,
                 "whole_cpu_s": run.whole_cpu_s, "whole_tokens": int(len(tokens)),
                 "startup_s": steady_from - run.t_launch, "startup_cpu_s": run.cpu_at(steady_from)}
    out["whole_tok_per_cpu_s"] = out["whole_tokens"] / out["whole_cpu_s"]
    if steady_to > steady_from + 1:
        n = gt.tokens_between(tokens, steady_from, steady_to)
        cpu = run.cpu_at(steady_to) - run.cpu_at(steady_from)
        span = steady_to - steady_from
        out.update(steady_s=span, steady_tokens=n, steady_cpu_s=cpu, steady_tps=n / span,
                   steady_tok_per_cpu_s=n / cpu if cpu > 0 else float("nan"),
                   in_flight=gt.streams_in_flight(truth, steady_from, steady_to))
    with open(f"{run.prefix}_requests.csv", newline="") as f:
        errs = gt.row_errors(csv.DictReader(f), truth)
    out["ttft_err_ms"] = [gt.pct(errs["ttft"], q) for q in (50, 99)] if errs["ttft"] else None
    out["itl_max_err_ms"] = [gt.pct(errs["itl_max"], q) for q in (50, 99)] if errs["itl_max"] else None
    out["itl_max_off_2ms"] = (sum(abs(x) > 2.0 for x in errs["itl_max"]) / len(errs["itl_max"])
                              if errs["itl_max"] else None)
    out["requests_ok"] = len(errs["ttft"])
    with open(f"{run.prefix}_requests.csv", newline="") as f:  # the steady state, as calibrate measures it
        steady = gt.row_errors(csv.DictReader(f), truth, steady_from + time.time() - time.monotonic(),
                               steady_to + time.time() - time.monotonic())
    tol = tol or Tolerances()
    out["tolerance"] = tol.describe()
    out["steady_accuracy"] = accuracy(steady["pairs"], tol)
    out["meets"] = (out["steady_accuracy"]["share"] or 0.0) >= tol.share
    out["stalls"] = next((x.strip() for x in run.output if x.startswith("client: ") and "stall" in x), "")
    out["limited"] = run.line("CLIENT-LIMITED")[:400]
    to_unix = time.time() - time.monotonic()
    with open(f"{run.prefix}_llm_history.csv", newline="") as f:
        hist = [h for h in csv.DictReader(f) if steady_from + 2 <= float(h["time"]) - to_unix <= steady_to + 1]
    num = lambda h, k: float(h[k]) if h.get(k) not in (None, "") else 0.0  # noqa: E731
    out["steady_stalls"] = {"intervals": len(hist), "stalls": int(sum(num(h, "client_stalls") for h in hist)),
                            "max_ms": max((num(h, "client_stall_max_ms") for h in hist), default=0.0),
                            "max_cpu_ms": max((num(h, "client_stall_cpu_max_ms") for h in hist), default=0.0)}
    return out


def report(r: dict) -> None:
    f = lambda v, nd=1: "-" if v is None else f"{v:,.{nd}f}"  # noqa: E731
    print(f"users {r['users']}: load average {r['load_start'][0]:.2f} at start, {r['load_end'][0]:.2f} at end")
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
    a = r["steady_accuracy"]
    if a["share"] is not None:
        print(f"  tolerances    {r['tolerance']}: {a['share'] * 100:.2f} % of {a['requests']} steady-state requests "
              f"within (TTFT {a['ttft_share'] * 100:.2f} %, itl_max {(a['itl_max_share'] or 0) * 100:.2f} %): "
              + ("meets them" if r["meets"] else "does NOT meet them"))
    st = r["steady_stalls"]
    print(f"  steady-state loop stalls over 2 ms: {st['stalls']} in {st['intervals']} intervals of 2 s, longest "
          f"{st['max_ms']:.1f} ms, at most {st['max_cpu_ms']:.1f} ms of it CPU")
    print(f"  whole run: {r['stalls'] or 'client: (no stall line)'}")
    if r["limited"]:
        print(f"  {r['limited']}")
    sys.stdout.flush()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--users", default="256,1024")
    ap.add_argument("--seconds", type=float, default=30.0)
    ap.add_argument("--itl-ms", type=float, default=20.0)
    ap.add_argument("--ttft-ms", type=float, default=200.0)
    ap.add_argument("--input-tokens", type=int, default=512)
    ap.add_argument("--output-tokens", type=int, default=128)
    ap.add_argument("--spawn-all-at-once", action="store_true", help="start every user within a second instead of "
                    "over one request's duration (users then stay in step with the fixed mock)")
    ap.add_argument("--ttft-error-ms", type=float, default=1.0)
    ap.add_argument("--itl-max-error-ms", type=float, default=2.0)
    ap.add_argument("--share", type=float, default=0.99)
    ap.add_argument("--calibration", metavar="FILE", help="run at this calibration's limit, with its tolerances")
    ap.add_argument("--json", metavar="FILE", help="also write the results as JSON")
    args = ap.parse_args()
    tol = Tolerances(args.ttft_error_ms, args.itl_max_error_ms, args.share)
    users_list = [int(u) for u in args.users.split(",")]
    if args.calibration:
        with open(os.path.expanduser(args.calibration)) as fh:
            cal = json.load(fh)
        tol = Tolerances(**cal["tolerances"])
        users_list = [int(cal["per_process"]["max_streams"])]
        print(f"at the calibrated limit: {users_list[0]} streams, {cal['per_process']['max_tps']:,.0f} tok/s "
              f"({cal['tolerance']})")
    results = []
    for users in users_list:
        with tempfile.TemporaryDirectory() as d:
            r = run_once(users, args.seconds, args.itl_ms, args.ttft_ms, args.input_tokens, args.output_tokens, d,
                         spread=not args.spawn_all_at_once, tol=tol)
        results.append(r)
        report(r)
    if args.json:
        with open(args.json, "w") as fh:
            json.dump(results, fh, indent=2)


if __name__ == "__main__":
    main()
