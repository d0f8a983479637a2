"""Faults on hosts really apart (one network namespace each, tests/netns.py): a worker killed with
SIGKILL, a 10-s partition of a worker then healed, a worker that joins late, the master killed
with SIGKILL. In each, the rows equal the server's log minus what the summary reports as lost
(cancelled requests are rows too). Skipped where network namespaces cannot be made.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import time

import pandas as pd

from tests.support.locust_runs import CHAT, LOCUST
from tests.support.multihost import MASTER_PORT, MOCK_PORT, PY, read_log, topology
from tests.support.netns import SPAWNED, Topology, wait_for_text
from tests.support.processes import ROOT

ENV = {**os.environ, "PYTHONPATH": ROOT}


class Run:
    """A mock, a master and workers on their own hosts; ``prefix`` is the master's --csv."""

    def __init__(self, topo: Topology, tmp_path, run_s: int, expect: int = 2, master_args: tuple = ()) -> None:
        self.topo, self.tmp = topo, tmp_path
        self.prefix = str(tmp_path / "run")
        self.mock_log = str(tmp_path / "mock.jsonl")
        self.mock_url = f"http://{topo.addr('mock')}:{MOCK_PORT}"
        self.mock = topo.popen("mock", [PY, "-m", "llmload.cli", "mock", "--host", topo.addr("mock"), "--port",
                                        str(MOCK_PORT), "--profile", "fixed", "--ttft-ms", "30", "--itl-ms", "8",
                                        "--log", self.mock_log], env=ENV, cwd=ROOT)
        wait_for_text(self.mock.log_path, "listening on", 30, self.mock)
        self.master = topo.popen("master", [*LOCUST, "-f", CHAT, "--headless", "--master", "--master-bind-host",
                                            topo.addr("master"), "--master-bind-port", str(MASTER_PORT),
                                            "--expect-workers", str(expect), "--expect-workers-max-wait", "60",
                                            "-u", "8", "-r", "8", "-t", f"{run_s}s", "--csv", self.prefix,
                                            "--ignore-eos", "--output-tokens", "40", "--input-tokens", "50-80",
                                            "--host", self.mock_url, "--stop-timeout", "5", *master_args],
                                 env=ENV, cwd=tmp_path)
        self.workers: dict[str, subprocess.Popen] = {}

    def add_worker(self, host: str, index: int) -> subprocess.Popen:
        w = self.topo.popen(host, [*LOCUST, "-f", CHAT, "--worker", "--master-host", self.topo.addr("master"),
                                   "--master-port", str(MASTER_PORT)], env=ENV, cwd=self.tmp)
        self.workers[host] = w
        wait_for_text(self.master.log_path, f"(index {index}) reported as ready", 60, self.master)
        return w

    def spawned(self) -> float:
        wait_for_text(self.master.log_path, SPAWNED, 60, self.master)
        return time.time()

    def wait_all(self, timeout: float) -> dict[str, int | None]:
        deadline = time.monotonic() + timeout
        procs = {"master": self.master, **self.workers}
        while any(p.poll() is None for p in procs.values()) and time.monotonic() < deadline:
            time.sleep(0.1)
        return {name: p.poll() for name, p in procs.items()}

    def log(self, at_least: int = 0) -> dict[str, dict]:
        deadline = time.monotonic() + 5  # the mock writes a line just after a response's last bytes
        while True:
            with open(self.mock_log) as f:
                entries = [json.loads(line) for line in f if line.strip()]
            if len(entries) >= at_least or time.monotonic() > deadline:
                return {e["request_id"]: e for e in entries}
            time.sleep(0.05)


def rows_of(*paths: str) -> pd.DataFrame:
    frames = [pd.read_csv(p, keep_default_na=False, na_values=[""]) for p in paths if os.path.exists(p)]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=["request_id", "status"])


def owner(request_id: str) -> str:
    return request_id.split("-")[0]  # "w<worker index><8 hex>": one per worker process


def test_worker_killed_with_sigkill(tmp_path):
    with topology(["master", "w1", "w2", "mock"], tmp_path) as topo:
        run = Run(topo, tmp_path, run_s=12)
        run.add_worker("w1", 0)
        run.add_worker("w2", 1)
        t_kill = run.spawned() + 4.0
        time.sleep(max(0.0, t_kill - time.time()))
        os.kill(run.workers["w1"].pid, signal.SIGKILL)
        codes = run.wait_all(60)
        text = read_log(run.master)
        assert codes["master"] == 1, text[-3000:]  # rows the server saw are missing: not a clean run
        assert codes["w2"] == 0
        m = re.search(r"LOST WORKER 0 \(\S+\): no final data; (\d+) of its requests have no row here", text)
        assert m, text[-3000:]
        lost = int(m.group(1))
        rows = rows_of(f"{run.prefix}_requests.csv")
        log = run.log(at_least=len(rows) + lost)
        assert not rows["request_id"].duplicated().any()
        assert set(rows["request_id"]) <= set(log)
        missing = set(log) - set(rows["request_id"])
        assert len(missing) == lost >= 1, (len(missing), lost)  # in flight when it died, at least
        w2_prefixes = {owner(r) for r in rows.loc[rows["worker"] == 1, "request_id"]}
        assert not {owner(r) for r in missing} & w2_prefixes  # every lost request was w1's
        # The master went on: w2 kept sending after w1 died.
        assert (rows.loc[rows["worker"] == 1, "start_time"] > t_kill + 2).any()


def test_partition_of_a_worker_for_10_s_then_healed(tmp_path):
    with topology(["master", "w1", "w2", "mock"], tmp_path) as topo:
        run = Run(topo, tmp_path, run_s=22)
        run.add_worker("w1", 0)
        run.add_worker("w2", 1)
        time.sleep(max(0.0, run.spawned() + 3.0 - time.time()))
        topo.partition("w1")  # w1's cable out: neither the master nor the server hears it
        time.sleep(10)
        topo.heal("w1")
        t_heal = time.time()
        codes = run.wait_all(90)
        text = read_log(run.master)
        assert codes == {"master": 0, "w1": 0, "w2": 0}, text[-3000:]
        assert "LOST WORKER" not in text and "LLM summary" in text
        rows = rows_of(f"{run.prefix}_requests.csv")
        log = run.log(at_least=len(rows))
        assert not rows["request_id"].duplicated().any()  # none twice
        # A connection w1 tried to open during the partition may have failed: the server never saw it.
        reached = rows[rows["status"] != "connect_error"]
        assert set(reached["request_id"]) == set(log)
        assert not set(rows.loc[rows["status"] == "connect_error", "request_id"]) & set(log)
        assert set(reached["status"]) <= {"ok", "cancelled"}
        # Rows of requests w1 sent after the heal arrived.
        assert (rows.loc[rows["worker"] == 0, "start_time"] > t_heal).any()


def test_worker_that_joins_late(tmp_path):
    with topology(["master", "w1", "w2", "mock"], tmp_path) as topo:
        run = Run(topo, tmp_path, run_s=16, expect=1, master_args=("--enable-rebalancing",))
        run.add_worker("w1", 0)
        time.sleep(max(0.0, run.spawned() + 3.0 - time.time()))
        t_join = time.time()
        run.add_worker("w2", 1)
        codes = run.wait_all(90)
        text = read_log(run.master)
        assert codes == {"master": 0, "w1": 0, "w2": 0}, text[-3000:]
        rows = rows_of(f"{run.prefix}_requests.csv")
        log = run.log(at_least=len(rows))
        assert not rows["request_id"].duplicated().any()
        assert set(rows["request_id"]) == set(log)  # users moved to w2 were cut off: cancelled rows, not lost
        assert set(rows["status"]) <= {"ok", "cancelled"}
        late = rows[rows["worker"] == 1]
        assert len(late) and (late["start_time"] > t_join).all()
        # While users move, the leaving ones finish their requests (and count); then 8 again, once the master's
        # count of users reaches both workers. Timed from w2's first request, not from its start: a busy machine
        # took 2.5 s to bring a worker's Python up, and w1's rows carried its own 4 users for 1 s after the move.
        moved = late["start_time"].min()
        settled = rows[(rows["start_time"] > moved + 3) & (rows["start_time"] < rows["start_time"].max() - 1)]
        assert len(settled) and (settled["users"] == 8).all(), settled["users"].value_counts()


def test_master_killed_with_sigkill(tmp_path):
    with topology(["master", "w1", "w2", "mock"], tmp_path) as topo:
        run = Run(topo, tmp_path, run_s=60, master_args=("--master-lost-after", "5"))
        run.add_worker("w1", 0)
        run.add_worker("w2", 1)
        time.sleep(max(0.0, run.spawned() + 4.0 - time.time()))
        os.kill(run.master.pid, signal.SIGKILL)
        t_kill = time.time()
        codes = run.wait_all(40)
        assert codes["w1"] == 1 and codes["w2"] == 1, codes  # each stopped by itself, and says it failed
        assert time.time() - t_kill < 30
        files = [f"{run.prefix}_requests.worker{i}.csv" for i in (0, 1)]
        for host, path in zip(("w1", "w2"), files, strict=True):
            text = read_log(run.workers[host])
            m = re.search(r"master lost; this worker kept (\d+) request rows in (\S+);", text)
            assert m and m.group(2) == path, text[-3000:]
            assert int(m.group(1)) == len(rows_of(path))
        rows = rows_of(*files)
        log = run.log(at_least=len(rows))
        assert not rows["request_id"].duplicated().any()
        assert set(rows["request_id"]) == set(log)  # the workers' own disks hold the whole run
        assert set(rows["status"]) <= {"ok", "cancelled"}  # --stop-timeout 5 lets most streams finish
        assert set(rows_of(f"{run.prefix}_requests.csv")["request_id"]) <= set(log)
        out = tmp_path / "report"
        rep = subprocess.run([PY, "-m", "llmload.cli", "report", *files, "--out", str(out)], capture_output=True,
                             text=True, cwd=ROOT, timeout=120)
        assert rep.returncode == 0, rep.stderr
        assert json.loads((out / "report.json").read_text())["steps"][0]["requests"] > 0


def test_ephemeral_port_exhaustion_is_reported_as_such(tmp_path):
    """A client host with 4 local ports for 8 users: the other 4 cannot connect, and the run says why."""
    with topology(["client", "mock"], tmp_path) as topo:
        topo._sysctl(topo.ns("client"), "net.ipv4.ip_local_port_range=40000 40003")
        mock_url = f"http://{topo.addr('mock')}:{MOCK_PORT}"
        mock = topo.popen("mock", [PY, "-m", "llmload.cli", "mock", "--host", topo.addr("mock"), "--port",
                                   str(MOCK_PORT), "--profile", "fixed", "--ttft-ms", "200", "--itl-ms", "50"],
                          env=ENV, cwd=ROOT)
        wait_for_text(mock.log_path, "listening on", 30, mock)
        prefix = str(tmp_path / "ports")
        client = topo.popen("client", [*LOCUST, "-f", CHAT, "--headless", "-u", "8", "-r", "8", "-t", "4s",
                                       "--host", mock_url, "--csv", prefix, "--output-tokens", "20",
                                       "--preflight", "off"], env=ENV, cwd=tmp_path)
        client.wait(60)
        text = read_log(client)
        said = [line for line in text.splitlines() if "ephemeral ports exhausted" in line]
        assert len(said) == 1 and "ip_local_port_range" in said[0], text[-3000:]
        rows = rows_of(f"{prefix}_requests.csv")
        refused = rows[rows["status"] == "connect_error"]
        assert len(refused) and refused["error"].str.contains("ephemeral ports exhausted").all()
        assert (rows["status"] == "ok").any()  # the users that had a port went on
