"""Soak on a real engine (issue 35, item 5): a master and 2 workers against llama.cpp's llama-server
(the tiny random-weight model of scripts/llama_server.py) or, with ``--engine vllm``, against vLLM's
CPU build (the tiny model of scripts/vllm_server.py) for ``--minutes`` (default 30); one worker
is killed (SIGKILL) and a new one started in its place at 1/3 and 2/3 of the run.

Measured, and judged:

* rows lost from surviving workers: every row a worker that lived to the end wrote to its own file
  (``PREFIX_requests.workerN.csv``) must be in the master's ``PREFIX_requests.csv`` (target 0);
* the master's resident memory from minute 1 to the end (target growth < 10 %);
* the master's open file descriptors, sampled every 30 s (target: flat, the same after each kill);
* every killed worker named in the master's summary (``LOST WORKER <index>``).

Run it alone on the machine: the engine, the master and the workers share
the 2 cores.

Usage::

    .venv/bin/python benchmarks/soak_engine.py                  # 30 minutes
    .venv/bin/python benchmarks/soak_engine.py --minutes 3      # a short check
    .venv/bin/python benchmarks/soak_engine.py --engine vllm    # 30 minutes against vLLM
"""

from __future__ import annotations

import argparse
import csv
import glob
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

import psutil

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from scripts import llama_server as llama  # noqa: E402
from scripts import vllm_server as vllm  # noqa: E402

CHAT = os.path.join(ROOT, "locustfiles", "chat.py")
LOCUST = [sys.executable, "-m", "locust"]
ENV = {**os.environ, "PYTHONPATH": ROOT}
SAMPLE_S = 30.0


def free_port() -> int:
    import socket
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def log(path: str):
    return open(path, "w")  # noqa: SIM115 - a child process's output, open as long as it runs


def read(path: str) -> str:
    with open(path) as f:
        return f.read()


def ids(path: str) -> list[str]:
    with open(path, newline="") as f:
        return [row["request_id"] for row in csv.DictReader(f)]


def start_worker(port: int, where: str) -> subprocess.Popen:
    os.makedirs(where, exist_ok=True)
    return subprocess.Popen([*LOCUST, "-f", CHAT, "--worker", "--master-port", str(port), "--csv",
                             os.path.join(where, "w")], cwd=where, env=ENV, stdout=subprocess.DEVNULL,
                            stderr=log(os.path.join(where, "stderr.log")))


def start_engine(engine: str, out: str):
    """The engine's URL, the model name it serves, and how to stop it."""
    if engine == "vllm":
        server = vllm.start_vllm_server(vllm.ensure_tiny_model(), vllm.server_args(),
                                        log_path=os.path.join(out, "vllm.log"))
        return server.url, server.served_name, lambda: vllm.stop_vllm_server(server)
    binary = llama.ensure_llama_server()
    model = llama.write_tiny_model(os.path.join(out, "tiny-llama.gguf"))
    server, url = llama.start_llama_server(model, 0, llama.server_args(4, 4096, "tiny-llama"), binary=binary,
                                           log_path=os.path.join(out, "llama-server.log"))
    return url, "tiny-llama", lambda: llama.stop_llama_server(server)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--users", type=int, default=8)
    ap.add_argument("--out", default="")
    ap.add_argument("--engine", choices=("llamacpp", "vllm"), default="llamacpp")
    args = ap.parse_args()
    out = args.out or tempfile.mkdtemp(prefix="llmload-soak-")
    os.makedirs(out, exist_ok=True)
    url, served, stop_engine = start_engine(args.engine, out)
    port = free_port()
    run_s = args.minutes * 60
    workers = {"a": start_worker(port, os.path.join(out, "a")), "b0": start_worker(port, os.path.join(out, "b0"))}
    master = subprocess.Popen(
        [*LOCUST, "-f", CHAT, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
         "--expect-workers", "2", "--headless", "-u", str(args.users), "-r", str(args.users), "-t", f"{int(run_s)}s",
         "--host", url, "--model", served, "--input-tokens", "32", "--output-tokens", "16", "--ignore-eos",
         "--csv", os.path.join(out, "run"), "--stop-timeout", "10", "--no-server-metrics", "--exit-code-on-error", "0"],
        cwd=out, env=ENV, stdout=log(os.path.join(out, "master.out")), stderr=log(os.path.join(out, "master.err")))
    proc = psutil.Process(master.pid)
    t0 = time.monotonic()
    kills = [run_s / 3, 2 * run_s / 3]
    killed: list[str] = []
    samples: list[tuple[float, float, int]] = []  # (s, RSS MB, fds)
    live = "b0"
    print(f"soak: {args.minutes:g} min, {args.users} users, {args.engine} at {url}, files in {out}", flush=True)
    try:
        next_sample = t0 + 5.0
        while master.poll() is None:
            now = time.monotonic()
            if kills and now - t0 >= kills[0]:
                kills.pop(0)
                workers[live].send_signal(signal.SIGKILL)
                workers[live].wait(10)
                killed.append(live)
                live = f"b{len(killed)}"
                workers[live] = start_worker(port, os.path.join(out, live))
                print(f"  {now - t0:7.0f} s: killed worker {killed[-1]}, started {live}", flush=True)
            if now >= next_sample:
                next_sample += SAMPLE_S
                try:
                    samples.append((now - t0, proc.memory_info().rss / 1e6, proc.num_fds()))
                    print(f"  {now - t0:7.0f} s: master {samples[-1][1]:.1f} MB, {samples[-1][2]} fds", flush=True)
                except psutil.Error:
                    pass
            time.sleep(1.0)
        for w in workers.values():
            try:
                w.wait(60)
            except subprocess.TimeoutExpired:
                w.kill()
    finally:
        for p in (master, *workers.values()):
            if p.poll() is None:
                p.kill()
        stop_engine()
    said = read(os.path.join(out, "master.out")) + read(os.path.join(out, "master.err"))
    master_ids = set(ids(os.path.join(out, "run_requests.csv")))
    lost_named = set(int(i) for i in re.findall(r"LOST WORKER (\d+)", said))
    print(f"\nmaster exit {master.returncode}; {len(master_ids):,} rows in run_requests.csv")
    survivors_lost = 0
    killed_indexes = set()
    for name in workers:
        own = glob.glob(os.path.join(out, name, "w_requests.worker*.csv"))
        if not own:
            print(f"  worker {name}: no file of its own")
            continue
        index = int(re.search(r"worker(\d+)\.csv$", own[0]).group(1))
        mine = ids(own[0])
        missing = [i for i in mine if i not in master_ids]
        fate = "killed" if name in killed else "survived"
        if name in killed:
            killed_indexes.add(index)
        else:
            survivors_lost += len(missing)
        print(f"  worker {name} (index {index}, {fate}): {len(mine):,} rows in its own file, {len(missing)} of them "
              f"not in the master's")
    base = next((s for s in samples if s[0] >= 60.0), samples[0] if samples else None)
    last = samples[-1] if samples else None
    growth = (last[1] / base[1] - 1) * 100 if base and last else float("nan")
    fds = sorted({s[2] for s in samples})
    print(f"rows lost from surviving workers: {survivors_lost} (target 0)")
    print(f"master memory: {base[1]:.1f} MB at {base[0]:.0f} s -> {last[1]:.1f} MB at {last[0]:.0f} s: "
          f"{growth:+.1f} % (target < 10 %)" if base and last else "master memory: no samples")
    print(f"master file descriptors over the run: {fds[0]}..{fds[-1]} (samples: {[s[2] for s in samples]})"
          if fds else "no fd samples")
    print(f"killed workers' indexes {sorted(killed_indexes)}, named LOST: {sorted(lost_named)}"
          f" ({'all named' if killed_indexes <= lost_named else 'NOT all named'})")
    ok = survivors_lost == 0 and growth < 10 and killed_indexes <= lost_named
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
