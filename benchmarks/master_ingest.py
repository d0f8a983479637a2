"""How many rows a second one master takes (issue 35, item 3).

A real Locust master (llmload's plugin, headless, pinned to CPU 0) and N light workers
(tests/support/zmq_peer.py ``--mode light``, pinned to CPU 1): each joins as a Locust worker and
replays request rows at a set rate in llmload's own messages (ROWS every 0.5 s, a report every
3 s), as a real worker ships them, but without generating any load. For each worker count and total
rate, one run of ``--seconds``; reported per run:

* rows/s sent and rows written (``PREFIX_requests.csv``; they must be equal: nothing is lost);
* the master's CPU over the run, in % of its one core, and per 1,000 rows;
* whether the master fell behind: its queue's "the master is behind its workers" line and the
  longest a payload waited there (the "caught up" line); and, since rows also wait in ZeroMQ's
  buffers before the master reads them, the drain: how long its CSV kept growing after the
  workers' last rows (``--seconds`` after the first, sampled every second), and the rows written
  per second from the first to the last;
* with ``--memory``: the master's resident memory every 30 s (a long ``--seconds``).

Usage::

    .venv/bin/python benchmarks/master_ingest.py --workers 4,8,16,32 --rates 5000,10000,20000 --seconds 15
    .venv/bin/python benchmarks/master_ingest.py --workers 16 --rates 16000 --seconds 600 --memory
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHAT = os.path.join(ROOT, "locustfiles", "chat.py")
ENV = {**os.environ, "PYTHONPATH": ROOT}


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pinned(cpu: int) -> list[str]:
    return ["taskset", "-c", str(cpu)] if os.cpu_count() and os.cpu_count() > 1 else []


def log(path: str):
    return open(path, "w")  # noqa: SIM115 - a child process's output, open as long as it runs


def count_rows(path: str) -> int:
    if not os.path.exists(path):
        return 0
    with open(path, "rb") as f:
        return max(0, sum(1 for _ in f) - 1)


def one_run(out: str, workers: int, rate: float, seconds: float, memory: bool) -> dict:
    os.makedirs(out, exist_ok=True)
    port = free_port()
    master = subprocess.Popen(
        [*pinned(0), sys.executable, "-m", "locust", "-f", CHAT, "--master", "--master-bind-host", "127.0.0.1",
         "--master-bind-port", str(port), "--expect-workers", str(workers), "--headless", "-u", str(workers), "-r",
         str(workers), "-t", f"{int(seconds + 4)}s", "--host", "http://127.0.0.1:9", "--preflight", "off",
         "--no-server-metrics", "--csv", os.path.join(out, "run"), "--stop-timeout", "5", "--exit-code-on-error", "0"],
        cwd=out, env=ENV, stdout=log(os.path.join(out, "master.out")), stderr=log(os.path.join(out, "master.err")))
    peers = [subprocess.Popen([*pinned(1), sys.executable, "-m", "tests.support.zmq_peer", "--port", str(port),
                               "--mode", "light", "--rate", str(rate / workers), "--seconds", str(seconds), "--out",
                               os.path.join(out, f"peer{i}.json")], cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL,
                              stderr=log(os.path.join(out, f"peer{i}.err"))) for i in range(workers)]
    proc = psutil.Process(master.pid)
    rss, cpu0, t_first = [], None, None
    csv_path = os.path.join(out, "run_requests.csv")
    sizes: list[tuple[float, int]] = []  # (monotonic s, the CSV's bytes): when the rows were written
    next_rss = time.monotonic()
    while master.poll() is None:
        time.sleep(1.0)
        now = time.monotonic()
        sizes.append((now, os.path.getsize(csv_path) if os.path.exists(csv_path) else 0))
        try:
            times = proc.cpu_times()
            if cpu0 is None and sizes[-1][1] > 0:
                cpu0, t_first = times.user + times.system, now  # the rows began: the steady part
            cpu1, t_last = times.user + times.system, now
            if not memory or now >= next_rss:
                rss.append(round(proc.memory_info().rss / 1e6, 1))
                next_rss = now + 30.0
        except psutil.Error:
            break
    for p in peers:
        try:
            p.wait(60)
        except subprocess.TimeoutExpired:
            p.kill()
    said = open(os.path.join(out, "master.err")).read()  # noqa: SIM115
    sent = 0
    for i in range(workers):
        try:
            with open(os.path.join(out, f"peer{i}.json")) as f:
                sent += json.load(f)["rows"]
        except (OSError, ValueError):
            pass
    written = count_rows(csv_path)
    span = (t_last - t_first) if t_first else float("nan")
    cpu = (cpu1 - cpu0) if cpu0 is not None else float("nan")
    waited = re.findall(r"caught up with its workers after (\d+) s", said)
    # Rows a worker sent wait in ZeroMQ's buffers as well as in the master's own queue: the time the CSV
    # kept growing after the workers' last rows (``seconds`` after the first) is how far behind it was.
    grown = [t for (t, n), (_, before) in zip(sizes[1:], sizes, strict=False) if n > before]
    last_write = grown[-1] if grown else float("nan")
    drain = max(0.0, last_write - (t_first + seconds)) if t_first else float("nan")
    return {"workers": workers, "rate": rate, "sent": sent, "written": written, "cpu_pct": 100 * cpu / span,
            "cpu_ms_per_1000_rows": 1000 * cpu / max(written, 1) * 1000, "behind": "is behind its workers" in said,
            "caught_up_after_s": max(map(int, waited)) if waited else 0, "rss_mb": rss,
            "drain_s": drain, "written_per_s": written / (last_write - t_first) if t_first and grown else float("nan"),
            "exit": master.returncode}


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--workers", default="4,8,16,32")
    ap.add_argument("--rates", default="5000,10000,20000")
    ap.add_argument("--seconds", type=float, default=15.0)
    ap.add_argument("--memory", action="store_true", help="sample the master's memory every 30 s (long runs)")
    ap.add_argument("--out", default="")
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="llmload-ingest-")
    print(f"master_ingest: files in {out}; master on CPU 0, light workers on CPU 1", flush=True)
    print(f"{'workers':>7} {'rows/s':>7} {'sent':>8} {'written':>8} {'CPU %':>6} {'CPU ms/1k rows':>14} "
          f"{'written/s':>9} {'drain s':>7} behind", flush=True)
    results = []
    for n in map(int, args.workers.split(",")):
        for rate in map(float, args.rates.split(",")):
            r = one_run(os.path.join(out, f"w{n}-r{int(rate)}"), n, rate, args.seconds, args.memory)
            results.append(r)
            behind = f"yes (caught up after {r['caught_up_after_s']} s)" if r["behind"] else "no"
            print(f"{n:>7} {rate:>7.0f} {r['sent']:>8,} {r['written']:>8,} {r['cpu_pct']:>6.0f} "
                  f"{r['cpu_ms_per_1000_rows']:>14.1f} {r['written_per_s']:>9,.0f} {r['drain_s']:>7.1f} {behind}",
                  flush=True)
            if args.memory:
                print(f"        master RSS every 30 s (MB): {r['rss_mb']}", flush=True)
    with open(os.path.join(out, "results.json"), "w") as f:
        json.dump(results, f, indent=1)
    return 0 if all(r["sent"] == r["written"] for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
