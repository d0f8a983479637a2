"""Fault experiments on separate hosts (not tests: they print what happens, for design work).

Master, w1, w2 and the mock each in a network namespace (tests/netns.py); a distributed run of
locustfiles/chat.py against the mock; mid-run, one fault:

- ``partition``: w1's cable down for ``--fault-s`` seconds (cut from master and mock), then up.
- ``cut``: only w1 <-> master dropped for ``--fault-s`` seconds (w1 keeps streaming from the mock).
- ``kill-worker``: ``kill -9`` of w1.
- ``kill-master``: ``kill -9`` of the master; workers are watched until they exit (bounded).

Afterwards: the master's PREFIX_requests.csv against the mock's log (rows lost, duplicated,
extra, per worker), statuses, rows per second per worker, exit codes and times, and Locust's
log lines about heartbeats, missing workers and reconnection. w1 is started first and waited
for, so it is worker index 0 and w2 is index 1.

Usage::

    sudo .venv/bin/python -m tests.support.multihost_experiments partition --out /tmp/exp-partition
    .venv/bin/python -m tests.support.multihost_experiments kill-master --run-s 60 --fault-at-s 8
"""

from __future__ import annotations

import argparse
import json
import os
import re
import signal
import sys
import time
from collections import Counter

import pandas as pd

from tests.support.netns import SPAWNED, Topology, wait_for_text

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
PY = sys.executable
CHAT = os.path.join(ROOT, "locustfiles", "chat.py")
MOCK_PORT = 8000
MASTER_PORT = 5557
INTERESTING = re.compile(r"heartbeat|missing|self-healed|ready|quit|stopped|Reset|reconnect|RPC|retry|llmload|"
                         r"Ramping|All users spawned|Shutting down|rebalanc|Traceback|Error|error|Timeout|"
                         r"connect|Got|Exception", re.I)


class Timeline:
    def __init__(self) -> None:
        self.t0 = time.time()
        self.events: list[tuple[float, str]] = []

    def mark(self, what: str) -> float:
        t = time.time()
        self.events.append((t, what))
        print(f"[{t - self.t0:7.2f} s] {what}", flush=True)
        return t


def log_lines(path: str, t0: float) -> list[str]:
    """Locust's log lines worth reading, with seconds since the experiment started."""
    out = []
    with open(path, errors="replace") as f:
        for line in f:
            if not INTERESTING.search(line):
                continue
            m = re.match(r"\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\]", line)
            rel = ""
            if m:
                ts = time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + int(m.group(2)) / 1000
                rel = f"{ts - t0:+7.2f} s "
            out.append(rel + line.rstrip()[:220])
    return out


def compare(prefix: str, mock_log: str, t0: float, fault_t: float | None) -> dict:
    rows = pd.read_csv(f"{prefix}_requests.csv", keep_default_na=False, na_values=[""]) \
        if os.path.exists(f"{prefix}_requests.csv") else pd.DataFrame(columns=["request_id", "worker", "status"])
    with open(mock_log) as f:
        log = [json.loads(line) for line in f if line.strip()]
    log_ids = {e["request_id"] for e in log}
    counts = Counter(rows["request_id"])
    row_ids = set(counts)
    lost = log_ids - row_ids
    # A request id is "<worker index><8 hex>-<n>": its process's prefix tells whose it was.
    owner = {rid.split("-")[0]: int(w) for rid, w in zip(rows["request_id"], rows["worker"], strict=True)}
    lost_by_worker = Counter(owner.get(rid.split("-")[0], f"?{rid[:1]}") for rid in lost)
    res = {
        "rows": len(rows), "mock_requests": len(log), "lost": len(lost),
        "lost_by_worker": {str(k): v for k, v in lost_by_worker.items()},
        "duplicated": sum(c - 1 for c in counts.values() if c > 1), "extra": len(row_ids - log_ids),
        "rows_by_worker": {str(k): int(v) for k, v in rows["worker"].value_counts().items()},
        "statuses": {str(k): int(v) for k, v in rows["status"].value_counts().items()},
        "mock_outcomes": dict(Counter(e["outcome"] for e in log)),
    }
    if fault_t is not None:
        after = [e for e in log if e["arrival_unix"] >= fault_t]
        res["mock_requests_after_fault"] = len(after)
        if after:
            res["last_mock_arrival_after_fault_s"] = round(max(e["arrival_unix"] for e in after) - fault_t, 2)
    if len(rows):
        rows = rows.assign(sec=((rows["start_time"] - t0) // 1).astype(int))
        per_sec = rows.groupby(["sec", "worker"]).size().unstack(fill_value=0)
        res["rows_started_per_second_by_worker"] = {int(s): {str(w): int(n) for w, n in r.items()}
                                                    for s, r in per_sec.iterrows()}
        ok = rows[rows["status"] == "ok"]
        worst = ok.sort_values("e2e_ms", ascending=False).head(5)
        res["slowest_ok"] = [{"worker": int(r.worker), "start_s": round(r.start_time - t0, 2), "ttft_ms": r.ttft_ms,
                              "e2e_ms": r.e2e_ms, "itl_max_ms": r.itl_max_ms} for r in worst.itertuples()]
    return res


def run(kind: str, out: str, run_s: int, fault_at_s: float, fault_s: float, users: int) -> dict:
    os.makedirs(out, exist_ok=True)
    env = {**os.environ, "PYTHONPATH": ROOT}
    prefix = os.path.join(out, "run")
    mock_log = os.path.join(out, "mock.jsonl")
    for p in (mock_log,):
        if os.path.exists(p):
            os.remove(p)
    tl = Timeline()
    with Topology(["master", "w1", "w2", "mock"], log_dir=out) as topo:
        tl.mark(f"topology up in {topo.setup_s * 1000:.0f} ms")
        mock_url = f"http://{topo.addr('mock')}:{MOCK_PORT}"
        mock = topo.popen("mock", [PY, "-m", "llmload.cli", "mock", "--host", topo.addr("mock"), "--port",
                                   str(MOCK_PORT), "--profile", "fixed", "--ttft-ms", "30", "--itl-ms", "8",
                                   "--log", mock_log], env=env, cwd=ROOT, log_path=os.path.join(out, "mock.log"))
        wait_for_text(mock.log_path, "listening on", 30, mock)
        master = topo.popen("master", [PY, "-m", "locust", "-f", CHAT, "--headless", "--master",
                                       "--master-bind-host", topo.addr("master"), "--master-bind-port",
                                       str(MASTER_PORT), "--expect-workers", "2", "--expect-workers-max-wait", "60",
                                       "-u", str(users), "-r", str(users), "-t", f"{run_s}s", "--csv", prefix,
                                       "--ignore-eos", "--output-tokens", "40", "--input-tokens", "50-80",
                                       "--host", mock_url, "--stop-timeout", "5"],
                            env=env, cwd=out, log_path=os.path.join(out, "master.log"))
        workers = {}
        for i, w in enumerate(("w1", "w2")):
            workers[w] = topo.popen(w, [PY, "-m", "locust", "-f", CHAT, "--worker", "--master-host",
                                        topo.addr("master"), "--master-port", str(MASTER_PORT)],
                                    env=env, cwd=out, log_path=os.path.join(out, f"{w}.log"))
            wait_for_text(master.log_path, f"(index {i}) reported as ready", 60, master)
            tl.mark(f"{w} ready (index {i})")
        wait_for_text(master.log_path, SPAWNED, 60, master)
        t_spawned = tl.mark("all users spawned")
        time.sleep(max(0.0, t_spawned + fault_at_s - time.time()))
        fault_t = None
        if kind == "partition":
            fault_t = tl.mark("partition w1 (cable down)")
            topo.partition("w1")
            time.sleep(fault_s)
            topo.heal("w1")
            tl.mark("heal w1")
        elif kind == "cut":
            fault_t = tl.mark("cut w1 <-> master")
            topo.cut("w1", "master")
            time.sleep(fault_s)
            topo.uncut("w1", "master")
            tl.mark("uncut w1 <-> master")
        elif kind == "kill-worker":
            fault_t = tl.mark("kill -9 w1")
            os.kill(workers["w1"].pid, signal.SIGKILL)
        elif kind == "kill-master":
            fault_t = tl.mark("kill -9 master")
            os.kill(master.pid, signal.SIGKILL)
        procs = {"master": master, **workers}
        exits: dict[str, tuple[float, int | None]] = {}
        deadline = time.time() + run_s + 150
        while len(exits) < len(procs) and time.time() < deadline:
            for name, p in procs.items():
                if name not in exits and p.poll() is not None:
                    exits[name] = (tl.mark(f"{name} exited rc={p.returncode}"), p.returncode)
            time.sleep(0.1)
        for name in procs:
            if name not in exits:
                tl.mark(f"{name} still running at the deadline (killed by teardown)")
        time.sleep(0.5)  # the mock logs a request just after its last bytes
        result = {
            "kind": kind, "users": users, "run_s": run_s,
            "exits_s_after_fault": {n: (round(t - fault_t, 2) if fault_t else None, rc)
                                    for n, (t, rc) in exits.items()},
            "events": [(round(t - tl.t0, 2), what) for t, what in tl.events],
            "compare": compare(prefix, mock_log, tl.t0, fault_t),
            "logs": {n: log_lines(p.log_path, tl.t0) for n, p in procs.items()},
        }
    result["topology_setup_ms"] = round(topo.setup_s * 1000)
    result["topology_teardown_ms"] = round(topo.teardown_s * 1000)
    with open(os.path.join(out, "result.json"), "w") as f:
        json.dump(result, f, indent=1, default=str)
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("kind", choices=["partition", "cut", "kill-worker", "kill-master"])
    ap.add_argument("--out", default=None, help="directory for logs, CSVs and result.json")
    ap.add_argument("--run-s", type=int, default=30, help="locust -t (seconds)")
    ap.add_argument("--fault-at-s", type=float, default=6.0, help="seconds after all users spawned")
    ap.add_argument("--fault-s", type=float, default=10.0, help="partition / cut length")
    ap.add_argument("--users", type=int, default=8)
    a = ap.parse_args()
    out = a.out or os.path.join("/tmp", f"llmload-exp-{a.kind}-{os.getpid()}")
    res = run(a.kind, out, a.run_s, a.fault_at_s, a.fault_s, a.users)
    print(json.dumps({k: v for k, v in res.items() if k != "logs"}, indent=1, default=str))
    for name, lines in res["logs"].items():
        print(f"\n--- {name} ---")
        print("\n".join(lines[-60:]))
    print(f"\nfiles in {out}")


if __name__ == "__main__":
    main()
