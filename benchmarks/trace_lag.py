"""Schedule lag of trace replays: how late each request left against the time its trace gave it.

The target (issues 20 and 23): p99 <= 5 ms for every shipped sample trace. It is a timing target,
so it is measured here, on a quiet machine, and not by the e2e tests (which replay the same samples
and hold the lag to a bound that only a scheduling bug breaks, not a busy neighbour). Each case is
one headless Locust run against `llmload mock` (the tests' settings), and prints per format the
requests, the send lag (row ``start_time`` - ``scheduled_time``) p50 / p99 / max, and the load
average, since other work on the machine moves every figure.

    python benchmarks/trace_lag.py                  # mooncake (2 processes), weka, otel
    python benchmarks/trace_lag.py --cases weka --repeats 3
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402

from llmload.mock.launch import start_mock_process, stop_mock_process  # noqa: E402
from llmload.sweep.server import free_port  # noqa: E402

TRACES = os.path.join(ROOT, "scenarios", "data", "traces")
CASES = {  # format: (trace keys, mock args, locust args), as the e2e tests replay them
    "mooncake": (f"{{path: {TRACES}/mooncake_sample.jsonl, time_scale: 0.25}}",
                 ["--output-mean-tokens", "16"], ["-u", "80", "-r", "80", "--processes", "2"]),
    "weka": (f"{{path: {TRACES}/weka_sample.jsonl, format: weka, time_scale: 0.5, loop: 20}}",
             ["--profile", "fixed", "--ttft-ms", "30", "--itl-ms", "2"], ["-u", "6", "-r", "10"]),
    "otel": (f"{{path: {TRACES}/otel_sample.jsonl, format: otel, time_scale: 0.5, loop: 20}}",
             ["--profile", "fixed", "--ttft-ms", "30", "--itl-ms", "2"], ["-u", "6", "-r", "10"]),
}
SCENARIO = "seed: 5\nworkloads:\n  replay:\n    ignore_eos: true\n    trace: {trace}\n"
LOCUSTFILE = "from llmload import users_from_scenario\nglobals().update(users_from_scenario({path!r}))\n"


def run_case(name: str, work: str) -> dict:
    trace, mock_args, locust_args = CASES[name]
    scen = os.path.join(work, f"{name}.yaml")
    with open(scen, "w") as f:
        f.write(SCENARIO.format(trace=trace))
    lf = os.path.join(work, f"{name}_locustfile.py")
    with open(lf, "w") as f:
        f.write(LOCUSTFILE.format(path=scen))
    mock, url = start_mock_process(mock_args)
    load = os.getloadavg()[0]
    prefix = os.path.join(work, name)
    extra = []
    if "--processes" in locust_args:
        port = str(free_port())
        extra = ["--master-port", port, "--master-bind-port", port]
    try:
        res = subprocess.run([sys.executable, "-m", "locust", "-f", lf, "--host", url, "--headless", "--csv", prefix,
                              "-t", "90s", "--stop-timeout", "20", *locust_args, *extra], cwd=work,
                             env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True, timeout=300)
    finally:
        stop_mock_process(mock)
    if res.returncode != 0:
        raise SystemExit(f"{name}: locust exited {res.returncode}: {res.stderr[-2000:]}")
    rows = pd.read_csv(f"{prefix}_requests.csv").dropna(subset=["scheduled_time"])
    lag = (rows["start_time"] - rows["scheduled_time"]).to_numpy() * 1000
    return {"requests": len(rows), "p50": float(np.percentile(lag, 50)), "p99": float(np.percentile(lag, 99)),
            "max": float(lag.max()), "load": (load, os.getloadavg()[0])}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    p.add_argument("--repeats", type=int, default=1)
    args = p.parse_args()
    print(f"{'format':>9} {'requests':>8} {'lag p50':>8} {'p99':>7} {'max':>7}  load average (start, end)  p99 <= 5 ms")
    for name in args.cases.split(","):
        if name not in CASES:
            raise SystemExit(f"--cases: unknown case {name!r}; expected some of {', '.join(CASES)}")
        for _ in range(args.repeats):
            with tempfile.TemporaryDirectory(prefix="trace-lag-") as work:
                r = run_case(name, work)
            print(f"{name:>9} {r['requests']:>8} {r['p50']:>8.2f} {r['p99']:>7.2f} {r['max']:>7.2f}  "
                  f"{r['load'][0]:.2f}, {r['load'][1]:.2f}{'':>16}{'yes' if r['p99'] <= 5 else 'NO'}")


if __name__ == "__main__":
    main()
