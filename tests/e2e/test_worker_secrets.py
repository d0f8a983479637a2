"""A literal secret header or query value never travels to a worker, and a master cannot make a
worker read a file of its choosing (issue 19, rows 7 and 3).

A master and two workers on 127.0.0.1; the workers reach the master through a relay that keeps
every byte of the ZeroMQ traffic (tests/support/tcp_tap.py). The master is given a literal
``X-Api-Key``, a secret ``--query`` value and a ``--calibration`` outside the workers' reach;
worker A has the same secrets on its own command line, worker B has none. The server
(tests/support/wire_server.py) logs each request's head: every request carries the secrets, all of
them from A; B says in one line which header it lacks; the captured traffic holds neither secret
(and does hold the master's other options: the capture sees the spawn messages); A did not open
the master's calibration.
"""

from __future__ import annotations

import json
import os
import subprocess
import time

from tests.support import tcp_tap, wire_server
from tests.support.locust_runs import CHAT, LOCUST
from tests.support.processes import ROOT, free_port

HEADER_SECRET, QUERY_SECRET = "lit-hdr-5f3a9c1e7b", "lit-qry-8d2e4a6c0f"


def _stop(*procs: subprocess.Popen) -> None:
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)


def test_literal_secrets_stay_on_the_master_and_each_worker_sends_its_own(tmp_path):
    log = tmp_path / "server.jsonl"
    server, url = wire_server.start_process(str(log))
    port = free_port()
    tap, tap_port = tcp_tap.start_process(port, str(tmp_path / "zmq.bin"))
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "calibration.json").write_text("{}")
    env = {**os.environ, "PYTHONPATH": ROOT}
    secrets = ["--header", f"X-Api-Key: {HEADER_SECRET}", "--query", f"api-key={QUERY_SECRET}"]
    workers = {}
    for name, extra in (("a", secrets), ("b", [])):
        (tmp_path / name).mkdir()
        workers[name] = subprocess.Popen([*LOCUST, "-f", CHAT, "--worker", "--master-port", str(tap_port), *extra],
                                         cwd=tmp_path / name, env=env, stdout=subprocess.DEVNULL,
                                         stderr=subprocess.PIPE, text=True)
    try:
        master = subprocess.run(
            [*LOCUST, "-f", CHAT, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port", str(port),
             "--expect-workers", "2", "--headless", "-u", "4", "-r", "4", "-t", "4s", "--host", url, "--model", "m",
             *secrets, "--header", "X-Script: paced_20ms", "--header", "X-Team: blue-team",
             "--calibration", str(elsewhere / "calibration.json"), "--no-server-metrics", "--stop-timeout", "3",
             "--output-tokens", "10", "--input-tokens", "10", "--csv", str(tmp_path / "run"),
             "--exit-code-on-error", "0"],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
        _stop(*workers.values())
    finally:
        for p in (*workers.values(), tap, server):
            if p.poll() is None:
                p.kill()
    errs = {name: w.stderr.read() for name, w in workers.items()}
    assert master.returncode == 0 and "Traceback" not in master.stderr, master.stderr[-3000:]
    time.sleep(0.2)  # the relay's last writes
    traffic = (tmp_path / "zmq.bin").read_bytes()
    assert b"blue-team" in traffic  # the capture holds the spawn messages (the master's other options) ...
    assert HEADER_SECRET.encode() not in traffic and QUERY_SECRET.encode() not in traffic  # ... and no secret
    assert b"X-Api-Key: ***" in traffic and b"api-key=***" in traffic
    with open(log) as f:
        requests = [e for e in map(json.loads, f) if e["script"] == "paced_20ms" and "chat" in e["target"]]
    assert requests, "no request reached the server"
    for e in requests:  # every request carries both secrets: worker A's own
        assert e["headers"].get("x-api-key") == HEADER_SECRET and f"api-key={QUERY_SECRET}" in e["target"]
        assert e["headers"].get("x-team") == "blue-team"
    assert "--header X-Api-Key: the master does not send secret values to its workers" in errs["b"], errs["b"][-2000:]
    assert "--header X-Api-Key" not in errs["a"], errs["a"][-2000:]
    # the master's --calibration is not opened on a worker: kept its own, with one warning
    assert "the master asked this worker to use calibration" in errs["a"], errs["a"][-2000:]
    assert "ignoring the calibration" not in errs["a"] or str(elsewhere) not in errs["a"]


def test_a_master_cannot_make_a_worker_read_a_scenario_outside_its_directories(mock_factory, tmp_path):
    """The master names a scenario file in a directory the worker's command line does not cover: the
    worker reads nothing, says so in one line, and sends no request (an older worker read the file and ran it)."""
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "20", "--itl-ms", "5")
    outside = tmp_path / "outside"
    outside.mkdir()
    hostile = outside / "hostile.yaml"
    hostile.write_text("workloads:\n  hostile:\n    input_tokens: 10\n    output_tokens: 5\n")
    (tmp_path / "w").mkdir()
    port = free_port()
    env = {**os.environ, "PYTHONPATH": ROOT}
    worker = subprocess.Popen([*LOCUST, "-f", CHAT, "--worker", "--master-port", str(port)], cwd=tmp_path / "w",
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        subprocess.run([*LOCUST, "-f", CHAT, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port",
                        str(port), "--expect-workers", "1", "--headless", "-u", "2", "-r", "2", "-t", "3s", "--host",
                        mock.url, "--scenario", str(hostile), "--no-server-metrics", "--stop-timeout", "3",
                        "--csv", str(tmp_path / "run")], cwd=tmp_path, env=env, capture_output=True, text=True,
                       timeout=120)
        _stop(worker)
    finally:
        if worker.poll() is None:
            worker.kill()
    err = worker.stderr.read()
    said = [line for line in err.splitlines() if "the master names a file outside this worker's directories" in line]
    assert len(said) == 1 and f"--scenario {hostile}" in said[0], err[-3000:]
    assert mock.log() == [], "the worker ran the master's scenario"
