"""Real `locust --headless` runs against `llmload mock`: local, --processes 2, master + 2 workers.

Each run checks that PREFIX_requests.csv has one row per request the server saw (none lost at
stop), and that statuses, token counts and timings agree with the server's ground-truth log.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pandas as pd
import pytest

from tests.support.locust_runs import CHAT, LOCUST, check_against_log, explained, load_rows, run_locust
from tests.support.processes import ROOT, free_port, raise_priority


@pytest.fixture
def mock(mock_factory):
    return mock_factory("--profile", "fixed", "--ttft-ms", "30", "--itl-ms", "8")


COMMON = ["--headless", "-t", "4s", "--ignore-eos", "--output-tokens", "40", "--input-tokens", "50-80"]


def test_local_run_writes_every_row_and_the_summary(mock, tmp_path):
    prefix = tmp_path / "local"
    res = run_locust(["-f", CHAT, "--host", mock.url, "-u", "8", "-r", "8", "--csv", str(prefix),
                      "--stop-timeout", "5", *COMMON], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = load_rows(prefix)
    check_against_log(rows, mock, expect_users=8)
    assert (rows["status"] == "ok").all()  # --stop-timeout let every stream finish
    assert "LLM summary" in res.stdout and "TTFT p50" in res.stdout
    assert "client: not limited" in res.stdout
    stats = pd.read_csv(f"{prefix}_llm_stats.csv")
    assert stats.loc[0, "scenario"] == "chat" and stats.loc[0, "requests"] == len(rows)
    assert 30.0 <= stats.loc[0, "median_ttft_ms"] < 45.0
    assert stats.loc[0, "median_tpot_ms"] == pytest.approx(8.0, abs=0.3)
    locust_stats = pd.read_csv(f"{prefix}_stats.csv")
    agg = locust_stats[locust_stats["Name"] == "Aggregated"].iloc[0]
    llm = locust_stats[locust_stats["Type"] == "LLM"].iloc[0]
    # TTFT/TPOT rows do not inflate the Aggregated row. (Locust writes its own CSV before the
    # streams finishing under --stop-timeout are counted; our requests CSV has them all.)
    assert agg["Request Count"] == llm["Request Count"] <= len(rows)
    assert set(locust_stats["Type"].dropna()) >= {"LLM", "TTFT", "TPOT"}
    # Locust's "Average size (bytes)" is bytes (issue 32, item 9): 40 tokens are ~40 SSE events of ~150 bytes
    assert llm["Average Content Size"] > 100 * 40, llm["Average Content Size"]
    # the client: one short verdict line; its details in PREFIX_run.json (issue 32, item 8)
    client = [line for line in res.stdout.splitlines() if line.startswith(("client", "CLIENT"))]
    # (its length: a busy host's stalls name their longest cause, "off CPU (the OS ran another process, or a
    # blocking call)", 305 characters then, path aside; the line it replaced was over 600, its advice twice)
    assert len(client) == 1 and len(client[0]) < 400 + len(str(tmp_path)), client
    assert client[0].count("--processes") <= 1 and client[0].count("free the machine") <= 1, client
    assert "garbage collector" not in res.stdout
    manifest = json.loads((tmp_path / "local_run.json").read_text())["client"]
    assert client[0].startswith(manifest["verdict"]) and "gc" in manifest["stalls"]
    assert manifest["timing"]["requests"] == len(rows) and manifest["intervals"] >= 1


def test_processes_2_cancels_in_flight_streams_without_losing_rows(mock, tmp_path):
    prefix = tmp_path / "procs"
    port = str(free_port())  # not Locust's default 5557: another run on this machine may hold it
    res = run_locust(["-f", CHAT, "--host", mock.url, "-u", "8", "-r", "8", "--csv", str(prefix),
                      "--processes", "2", "--master-bind-port", port, "--master-port", port, "--verbose", *COMMON],
                     tmp_path)
    with explained(res, tmp_path / "locust.log"):  # on failure: the master's and workers' llmload lines
        assert res.returncode == 0, res.stderr[-3000:]
        # --verbose: the client's details below its line, every worker's stalls summed (issue 32, item 8)
        assert "client details:" in res.stdout and "garbage collector:" in res.stdout, res.stdout[-3000:]
        rows = load_rows(prefix)
        check_against_log(rows, mock, expect_users=8, prefix=prefix)  # a row short: which, and was it sent
        assert (rows["status"] == "cancelled").sum() >= 1  # no --stop-timeout: streams cut at the end
        assert set(rows["worker"]) == {0, 1}


def test_master_and_two_workers(mock, tmp_path):
    port = free_port()
    prefix = tmp_path / "dist"
    workers = [subprocess.Popen([*LOCUST, "-f", CHAT, "--worker", "--master-port", str(port)], cwd=tmp_path,
                                env={**os.environ, "PYTHONPATH": ROOT}, stdout=subprocess.DEVNULL,
                                stderr=subprocess.PIPE, text=True) for _ in range(2)]
    try:
        res = run_locust(["-f", CHAT, "--master", "--master-bind-port", str(port), "--expect-workers", "2",
                          "--host", mock.url, "-u", "12", "-r", "12", "--csv", str(prefix), "--stop-timeout", "3",
                          *COMMON], tmp_path)
        assert res.returncode == 0, res.stderr[-3000:]
    finally:
        for w in workers:
            try:
                w.wait(20)
            except subprocess.TimeoutExpired:
                w.kill()
    rows = load_rows(prefix)
    check_against_log(rows, mock, expect_users=12)
    assert set(rows["worker"]) == {0, 1}
    assert "LLM summary" in res.stdout
    manifest = __import__("json").loads((tmp_path / "dist_run.json").read_text())
    assert manifest["workers"] == 2 and set(rows["run_id"]) == {manifest["run_id"]}  # the master stamps every row


@pytest.mark.timing
def test_timing_accuracy_with_64_users_in_one_process(mock_factory, tmp_path):
    """TTFT and TPOT against the server's log, 64 concurrent streams. The figure (within 1 ms at p99)
    needs a quiet machine: benchmarks/timing_accuracy.py. Here, bounds a timing bug breaks: a TTFT
    or TPOT taken at the wrong moment is off for every request (the median), by a token gap (10 ms)
    for TTFT, by a gap over the request's 49 (0.2 ms) for TPOT. The p99 only catches a gross stall:
    in the timing tier of a fresh CI run it was 31.5 ms with the median at 0.004 ms (a busy host
    descheduling a few of the 64 greenlets' reads), so it is held to 100 ms."""
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "50", "--itl-ms", "10")
    raise_priority(mock.proc.pid)  # its own timestamps are the truth: a descheduled mock would bend them
    prefix = tmp_path / "acc"
    res = run_locust(["-f", CHAT, "--host", mock.url, "-u", "64", "-r", "64", "--csv", str(prefix),
                      "--headless", "-t", "6s", "--stop-timeout", "5", "--ignore-eos", "--output-tokens", "50",
                      "--input-tokens", "64"], tmp_path, boosted=True)  # the client's timing, not the scheduler's
    assert res.returncode == 0, res.stderr[-3000:]
    rows = load_rows(prefix)
    ok = rows[rows["status"] == "ok"]
    assert len(ok) >= 300
    log = mock.log_by_id(expect=len(rows))
    ttft_err, tpot_err = [], []
    for r in ok.itertuples():
        e = log[r.request_id]
        ttft_err.append(r.ttft_ms - (e["first_token_mono"] - e["arrival_mono"]) * 1000)
        tpot_err.append(r.tpot_ms - (e["last_token_mono"] - e["first_token_mono"]) * 1000 / (e["tokens_sent"] - 1))
    assert min(ttft_err) > -0.5  # never shorter than the truth
    assert np.percentile(np.abs(ttft_err), 50) < 1.0 and np.percentile(np.abs(ttft_err), 99) < 100.0, \
        np.percentile(ttft_err, [50, 99, 100])
    assert np.percentile(np.abs(tpot_err), 50) < 0.1 and np.percentile(np.abs(tpot_err), 99) < 2.0, \
        np.percentile(tpot_err, [50, 99, 100])


def test_step_load_report_finds_the_profiles_capacity(mock_factory, tmp_path):
    """16 sequences fit the engine; a 17th waits a whole request (~0.8 s) for a slot. With a TTFT
    p95 SLO of 300 ms the capacity, known from the parameters, is 16 users."""
    mock = mock_factory("--profile", "llama3-70b-2xa100", "--max-num-seqs", "16", "--step-base-ms", "20",
                        "--step-per-seq-ms", "0", "--step-per-prefill-token-ms", "0",
                        "--step-per-context-token-ms", "0", "--api-overhead-ms", "0",
                        "--kv-capacity-tokens", "10000000")
    prefix = tmp_path / "steps"
    res = run_locust(["-f", os.path.join(ROOT, "locustfiles", "steps.py"), "--host", mock.url, "--headless",
                      "--csv", str(prefix), "--steps", "4,8,12,16,20,24", "--step-seconds", "5", "--ignore-eos",
                      "--output-tokens", "40", "--input-tokens", "20", "--stop-timeout", "5"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    out = tmp_path / "report"
    rep = subprocess.run([sys.executable, "-m", "llmload.cli", "report", str(prefix), "--slo", "ttft_p95_ms=300",
                          "--warmup-s", "2", "--gpu-hourly-usd", "2", "--target-rps", "50", "--out", str(out)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert rep.returncode == 0, rep.stderr
    data = __import__("json").loads((out / "report.json").read_text())
    assert [s["users"] for s in data["steps"]] == [4, 8, 12, 16, 20, 24]
    cap = data["capacity"]
    assert cap["users"] == 16 and "ttft_p95_ms" in cap["limited_by"], cap
    assert data["cost"]["usd_per_request"] > 0 and data["plan"]["replicas"] >= 1
    assert "capacity:" in rep.stdout
