"""Hostile peers on the master's ZeroMQ port, beside two honest workers (issue 35).

A process that never joined sends llmload's own messages with hostile payloads, frames msgpack
cannot read and messages that speak as someone else: each sender is refused in one line, the run
ends clean (exit 0, no LOST WORKER, no traceback) and every request the server saw has its row.
A worker that joined sends each kind of malformed payload (wrong type, huge integer, NaN, infinity,
missing field, extra field, a 64 MiB field, a row of another worker, a protocol version from the
future): each is refused with its reason, the summary names the worker, and no other worker loses
a row. The peers are tests/support/zmq_peer.py (plain pyzmq, Locust's protocol)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

import pytest

from llmload.metrics.record import NEVER_SENT
from llmload.plugin.cluster.messages import PROTOCOL_VERSION
from tests.support.locust_runs import CHAT, LOCUST, load_rows
from tests.support.processes import ROOT, free_port

pytestmark = pytest.mark.e2e

COMMON = ["--headless", "--ignore-eos", "--output-tokens", "12", "--input-tokens", "20", "--stop-timeout", "3",
          "--no-server-metrics", "--exit-code-on-error", "0"]
ENV = {**os.environ, "PYTHONPATH": ROOT}


def _start(args, cwd, **kw) -> subprocess.Popen:
    return subprocess.Popen(args, cwd=cwd, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, **kw)


def _peer(port: int, mode: str, out, *extra: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "tests.support.zmq_peer", "--port", str(port), "--mode", mode,
                             "--out", str(out), *extra], cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)


def _end(*procs: subprocess.Popen) -> None:
    for p in procs:
        try:
            p.wait(30)
        except subprocess.TimeoutExpired:
            p.kill()
            p.wait(10)


def _run(tmp_path, mock, peer_mode: str, expect_workers: int, seconds: int = 6, peer_args: tuple = ()):
    """Master + 2 honest workers + one peer; (master's rc, its stdout+stderr, rows, served ids, peer's json)."""
    port = free_port()
    workers = [_start([*LOCUST, "-f", CHAT, "--worker", "--master-port", str(port)], tmp_path) for _ in range(2)]
    prefix = tmp_path / "run"
    master = _start([*LOCUST, "-f", CHAT, "--master", "--master-bind-host", "127.0.0.1", "--master-bind-port",
                     str(port), "--expect-workers", str(expect_workers), "--host", mock.url, "-u", "6", "-r", "6",
                     "-t", f"{seconds}s", "--csv", str(prefix), *COMMON], tmp_path)
    out = tmp_path / "peer.json"
    peer = _peer(port, peer_mode, out, *peer_args)
    try:
        stdout, stderr = master.communicate(timeout=120)
        _end(peer, *workers)
    finally:
        for p in (master, peer, *workers):
            if p.poll() is None:
                p.kill()
    assert peer.returncode == 0, peer.stderr.read()[-2000:]
    said = stdout + stderr
    rows = load_rows(prefix)
    served = mock.log_by_id(expect=len(rows))
    return master.returncode, said, rows, served, json.loads(out.read_text())


def _every_request_has_its_row(rows, served, not_index: int | None = None) -> None:
    sent = rows[rows["error"] != NEVER_SENT]  # a user stopped while it connected: no server saw it
    assert len(served) > 20 and set(sent["request_id"]) == set(served), (len(sent), len(served))
    workers = set(rows["worker"])  # the two honest workers' rows, whichever indexes Locust gave them
    assert len(workers) == 2 and not_index not in workers, (workers, not_index)


def _llmload_lines(said: str) -> str:
    return "\n".join(line for line in said.splitlines() if "llmload" in line or "LOST" in line or "REFUSED" in line)


def test_a_process_that_never_joined_is_refused_in_one_line_per_sender(mock_factory, tmp_path):
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "20", "--itl-ms", "5")
    rc, said, rows, served, peer = _run(tmp_path, mock, "rogue", expect_workers=2, seconds=10)  # a slow peer's turn
    lines = _llmload_lines(said)
    assert rc == 0 and "Traceback" not in said, lines[-4000:]
    assert "LOST WORKER" not in said and "REFUSED" not in said and "9223372036854775807" not in said, lines
    _every_request_has_its_row(rows, served)
    refused = [line for line in said.splitlines() if "llmload: refused" in line]
    rogue, spoofer = peer["identities"]
    assert len(refused) == 2, refused  # one line per sender, whatever each sent after its first
    assert sum(rogue in line for line in refused) == 1 and "it never joined this run" in refused[0] + refused[1]
    junk = [line for line in refused if spoofer in line]
    assert len(junk) == 1 and "not a Locust message" in junk[0], junk
    assert "Uncaught exception" not in said


FUTURE = PROTOCOL_VERSION + 95  # the peer's "protocol version from the future" (tests/support/zmq_peer.py)
HOSTILE_REASONS = [
    r"refused its llmload_users: t: expected a finite number in 0\.\.1e\+11, got 'yesterday'",
    r"refused its llmload_rows: rows\[0\]\.completion_tokens: expected a whole number 0\.\.4294967296, "
    r"got 18446744073709551615",
    r"rows\[0\]\.ttft_ms: expected a finite number in 0\.\.1e\+15, got nan",
    r"rows\[0\]\.e2e_ms: expected a finite number in 0\.\.1e\+15, got inf",
    r"refused its llmload_report: missing field 'token'",
    r"refused its llmload_rows: unknown field 'also'",
    r"refused its llmload_sent: text of 67,108,864 characters, over the 1,024 allowed",
    r"refused its llmload_rows: a row of worker 2147483647 \(request '[^']+-h4'\); this master gave it index \d",
    r"refused its llmload_report: stats\.chat\.histograms\.ttft: missing field 'c'",
    rf"ignored: protocol version {FUTURE}, this master speaks \d",
]


def test_malformed_payloads_from_a_worker_that_joined_are_refused_with_their_reasons(mock_factory, tmp_path):
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "20", "--itl-ms", "5")
    t0 = time.monotonic()
    rc, said, rows, served, peer = _run(tmp_path, mock, "hostile", expect_workers=3, seconds=8,
                                        peer_args=("--delay", "1.5"))
    lines = _llmload_lines(said)
    assert "Traceback" not in said and "Uncaught exception" not in said, lines[-4000:]
    assert rc == 1, lines[-4000:]  # what a worker of the run said was refused: not a clean run, and said why
    for reason in HOSTILE_REASONS:
        assert re.search(reason, said), f"{reason!r} not in:\n{lines}"
    me = peer["identity"]
    assert f"REFUSED MESSAGES from worker {me}" in said and f"REFUSED WORKER {me}: protocol version {FUTURE}" in said
    assert "LOST WORKER" not in said, lines
    heartbeat = [line for line in said.splitlines() if "Locust's heartbeat message" in line]
    assert len(heartbeat) == 1 and me in heartbeat[0], lines
    _every_request_has_its_row(rows, served, peer["index"])  # the honest workers lost nothing, the master went on
    assert time.monotonic() - t0 < 90
