"""Master, workers and the mock on hosts really apart: one network namespace each (tests/netns.py).

The distributed run checks what test_e2e_locust checks on one host (one row per request the
server saw, statuses, timings against its log) and that the traffic really crossed the links:
each host has nothing but its own eth0 and the bridge, the mock sees connections from the
workers' addresses, and the link counters grew by at least the bytes the run must have moved.
Skipped where network namespaces cannot be made (not root, no iproute2, unshare denied).
"""

from __future__ import annotations

import json
import os
import subprocess
import time

import pandas as pd
import pytest

from tests.support.locust_runs import CHAT, LOCUST, check_against_log, load_rows
from tests.support.multihost import MASTER_PORT, MOCK_PORT, PY, read_log, topology
from tests.support.netns import Topology, leftovers, namespaces, pid_alive, wait_for_text
from tests.support.processes import ROOT, Mock


def root_links() -> list[str]:
    out = subprocess.run(["ip", "-j", "link", "show"], capture_output=True, text=True, timeout=10, check=True)
    return sorted(link["ifname"] for link in json.loads(out.stdout))


TCP_SERVER = """
import socket, sys
s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind((sys.argv[1], 9000)); s.listen(); print("listening", flush=True)
while True:
    c, peer = s.accept(); c.sendall(peer[0].encode()); c.close()
"""
TCP_CLIENT = """
import socket, sys
try:
    c = socket.create_connection((sys.argv[1], 9000), timeout=float(sys.argv[2])); print(c.recv(100).decode())
except OSError as e:
    print(type(e).__name__, e); sys.exit(1)
"""


def test_hosts_meet_only_through_the_bridge_and_leave_nothing_behind(tmp_path):
    links_before = root_links()
    with topology(["a", "b", "c"], tmp_path) as topo:
        assert topo.links("a") == ["lo", "eth0"]
        routes = [r for r in topo.routes("a") if r.get("table") != "local"]
        assert [r["dst"] for r in routes] == ["10.231.0.0/24"] and routes[0]["dev"] == "eth0"  # no default route
        server = topo.popen("b", [PY, "-c", TCP_SERVER, topo.addr("b")])
        wait_for_text(server.log_path, "listening", 10, server)
        res = topo.run("a", [PY, "-c", TCP_CLIENT, topo.addr("b"), "2"])
        assert res.returncode == 0 and res.stdout.strip() == topo.addr("a"), res.stdout + res.stderr
        # Loopbacks are each host's own: b's server is not on a's 127.0.0.1.
        assert topo.run("a", [PY, "-c", TCP_CLIENT.replace("sys.argv[1]", "'127.0.0.1'"), "-", "2"]).returncode == 1
        assert root_links() == links_before  # nothing in the machine's own namespace

        topo.partition("b")
        t0 = time.monotonic()
        res = topo.run("a", [PY, "-c", TCP_CLIENT, topo.addr("b"), "1"])
        assert res.returncode == 1 and "timed out" in res.stdout, res.stdout  # dropped, not refused
        assert time.monotonic() - t0 >= 0.9
        topo.heal("b")
        res = topo.run("a", [PY, "-c", TCP_CLIENT, topo.addr("b"), "2"])
        assert res.returncode == 0, res.stdout

        topo.cut("a", "b")  # only a <-> b: c still reaches b
        res = topo.run("a", [PY, "-c", TCP_CLIENT, topo.addr("b"), "1"])
        assert res.returncode == 1 and "timed out" in res.stdout, res.stdout
        assert topo.run("c", [PY, "-c", TCP_CLIENT, topo.addr("b"), "2"]).stdout.strip() == topo.addr("c")
        topo.uncut("a", "b")
        assert topo.run("a", [PY, "-c", TCP_CLIENT, topo.addr("b"), "2"]).stdout.strip() == topo.addr("a")
    assert server.poll() is not None
    assert leftovers([topo.id]) == [] and not [ns for ns in namespaces() if topo.id in ns]
    assert root_links() == links_before


def test_a_failing_body_still_cleans_up(tmp_path):
    pidfile = tmp_path / "escaped.pid"
    with pytest.raises(ZeroDivisionError), topology(["a"], tmp_path) as topo:
        sleeper = topo.popen("a", ["sleep", "60"])
        # A grandchild in a session of its own escapes the process group; the namespace sweep gets it.
        topo.popen("a", ["sh", "-c", f"setsid sh -c 'echo $$ > {pidfile}; exec sleep 61' & wait"])
        wait_for_text(str(pidfile), "\n", 10)
        1 / 0  # noqa: B018
    assert sleeper.poll() is not None
    escaped = int(pidfile.read_text())
    deadline = time.monotonic() + 5
    while pid_alive(escaped) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not pid_alive(escaped)
    assert leftovers([topo.id]) == []
    assert topo.teardown_s < 10




def grown(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {k: after[k] - before[k] for k in after}


def mock_peers(topo: Topology) -> set[str]:
    """Addresses of the clients connected to the mock right now."""
    res = topo.run("mock", ["ss", "-Htn", "state", "established", "sport", f"= :{MOCK_PORT}"])
    return {line.split()[-1].rsplit(":", 1)[0] for line in res.stdout.splitlines() if line.strip()}


def test_master_and_two_workers_on_separate_hosts(tmp_path):
    t_wall = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": ROOT}
    prefix = tmp_path / "multi"
    with topology(["master", "w1", "w2", "mock"], tmp_path) as topo:
        mock_url = f"http://{topo.addr('mock')}:{MOCK_PORT}"
        mock_log = str(tmp_path / "mock.jsonl")
        mock = topo.popen("mock", [PY, "-m", "llmload.cli", "mock", "--host", topo.addr("mock"), "--port",
                                   str(MOCK_PORT), "--profile", "fixed", "--ttft-ms", "30", "--itl-ms", "8",
                                   "--log", mock_log], env=env, cwd=ROOT)
        wait_for_text(mock.log_path, "listening on", 30, mock)
        before = {h: (topo.link_counters(h), topo.port_counters(h)) for h in topo.hosts}

        master = topo.popen("master", [*LOCUST, "-f", CHAT, "--headless", "--master", "--master-bind-host",
                                       topo.addr("master"), "--master-bind-port", str(MASTER_PORT),
                                       "--expect-workers", "2", "--expect-workers-max-wait", "60",
                                       "-u", "8", "-r", "8", "-t", "6s", "--csv", str(prefix), "--ignore-eos",
                                       "--output-tokens", "40", "--input-tokens", "50-80", "--host", mock_url,
                                       "--stop-timeout", "5"], env=env, cwd=tmp_path)
        workers = [topo.popen(w, [*LOCUST, "-f", CHAT, "--worker", "--master-host", topo.addr("master"),
                                  "--master-port", str(MASTER_PORT)], env=env, cwd=tmp_path)
                   for w in ("w1", "w2")]

        peers: set[str] = set()
        deadline = time.monotonic() + 60
        while not {topo.addr("w1"), topo.addr("w2")} <= peers and master.poll() is None \
                and time.monotonic() < deadline:
            peers |= mock_peers(topo)
            time.sleep(0.2)
        try:
            master.wait(90)
            for w in workers:
                w.wait(30)
        except subprocess.TimeoutExpired:
            pass
        logs = {p.host: read_log(p) for p in [master, *workers]}
        assert master.returncode == 0, logs["master"][-4000:]
        assert [w.returncode for w in workers] == [0, 0], logs["w1"][-2000:] + logs["w2"][-2000:]
        after = {h: (topo.link_counters(h), topo.port_counters(h)) for h in topo.hosts}

        # The workers, and only they, sent the mock requests, from their own addresses; the master
        # only read its /metrics (once per interval, the one process that does).
        assert {topo.addr("w1"), topo.addr("w2")} <= peers <= {topo.addr("w1"), topo.addr("w2"), topo.addr("master")}
        scraped = pd.read_csv(f"{prefix}_server_metrics.csv").query("metric == 'up'")
        assert set(scraped["endpoint"]) == {mock_url + "/metrics"} and (scraped["value"] == 1).all()
        for w in ("w1", "w2"):
            assert topo.links(w) == ["lo", "eth0"]
            main = [r for r in topo.routes(w) if r.get("table") != "local"]
            assert [(r["dst"], r["dev"]) for r in main] == [("10.231.0.0/24", "eth0")]  # no other way out

        rows = load_rows(prefix)
        check_against_log(rows, Mock(url=mock_url, port=MOCK_PORT, log_path=mock_log, proc=mock), expect_users=8)
        assert set(rows["worker"]) == {0, 1}
        assert "LLM summary" in logs["master"]

        # Counters: what must have crossed each cable. Every streamed token is one SSE event of
        # more than 100 bytes (`data: {"id":...,"choices":[{"delta":{"content":...}}]}`), and each
        # row reaches the master as a msgpack tuple of 20+ fields: its request id, scenario and
        # status, and at least six 9-byte floats (start time, TTFT, TPOT, E2E, ...): > 64 bytes.
        delta = {h: grown(before[h][0], after[h][0]) for h in topo.hosts}
        port = {h: grown(before[h][1], after[h][1]) for h in topo.hosts}
        tokens = int(rows["completion_tokens"].fillna(0).sum())
        streamed = 100 * tokens
        print(f"\nmultihost: {len(rows)} rows, {tokens} tokens; bytes rx/tx per host eth0: "
              + ", ".join(f"{h} {d['rx_bytes']}/{d['tx_bytes']}" for h, d in delta.items()))
        assert delta["mock"]["tx_bytes"] >= streamed and port["mock"]["rx_bytes"] >= streamed
        assert delta["w1"]["rx_bytes"] + delta["w2"]["rx_bytes"] >= streamed
        for w in ("w1", "w2"):
            # Each worker ran half the users; the bridge forwarded its share onto its cable.
            assert delta[w]["rx_bytes"] >= streamed / 4 and port[w]["tx_bytes"] >= streamed / 4
        assert delta["master"]["rx_bytes"] >= 64 * len(rows)
        assert delta["master"]["tx_bytes"] > 0 and delta["w1"]["tx_bytes"] > 0
    t_wall = time.perf_counter() - t_wall
    assert leftovers([topo.id]) == []
    print(f"multihost: topology setup {topo.setup_s * 1000:.0f} ms, teardown {topo.teardown_s * 1000:.0f} ms, "
          f"test wall {t_wall:.1f} s")
