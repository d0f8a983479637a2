"""The explicit warm-up, end to end: a deliberately slow warm-up (far more users than the engine has
sequences) before a step ladder; its rows are marked and change nothing in the report."""

from __future__ import annotations

import json
import os
import re
import shutil

import pandas as pd

from llmload.files import WARMUP_PHASE
from llmload.report import ReportOptions, build_report, parse_slo
from tests.support.locust_runs import KNOWN_CAPACITY_MOCK, load_rows, run_locust
from tests.support.processes import ROOT, free_port

WARMUP_S, STEP_S = 8, 10


def _report(path, slos):
    rep = build_report(str(path), ReportOptions(slos=slos, warmup_s=2.0))
    return [s.data for s in rep.overall.steps], rep.overall.capacity, rep.notes


def test_a_slow_warmup_is_marked_and_left_out_of_the_report(mock_factory, tmp_path):
    """16 sequences fit; the warm-up's 48 users queue for a slot (TTFT p95 far over 200 ms), the
    4- and 8-user steps after it do not. The SLO stop must not judge the warm-up (its rows fill the
    live window for seconds after it), and the report must be the report of the steps alone."""
    mock = mock_factory(*KNOWN_CAPACITY_MOCK)
    prefix = tmp_path / "warm"
    res = run_locust(["-f", os.path.join(ROOT, "locustfiles", "steps.py"), "--host", mock.url, "--headless",
                      "--csv", str(prefix), "--steps", "4,8", "--step-seconds", str(STEP_S),
                      "--warmup-seconds", str(WARMUP_S), "--warmup-users", "48", "--ignore-eos",
                      "--slo", "ttft_p95_ms=200", "--slo-stop-after", "3",
                      "--output-tokens", "20", "--input-tokens", "20", "--stop-timeout", "10"], tmp_path, timeout=180)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "SLO stop:" not in res.stdout, res.stdout[-3000:]
    rows = load_rows(prefix)
    warm = rows[rows["phase"] == WARMUP_PHASE]
    after = rows[rows["phase"] != WARMUP_PHASE]
    assert len(warm) > 50 and len(after) > 100
    assert warm["users"].max() == 48 and warm["ttft_ms"].quantile(0.95) > 400  # the warm-up was slow
    assert warm["start_time"].max() < after["start_time"].min()  # marked by start: before the end, none after
    assert after["ttft_ms"].quantile(0.95) < 200
    # the steps' clock started after the warm-up: each step ran its 10 s (less the 48 users' ramp-down:
    # until their queued requests end, rows carry the higher user count); without, the first would get 2 s
    for users in (4, 8):
        span = after[after["users"] == users]["start_time"]
        assert span.max() - span.min() > STEP_S - 3, (users, span.max() - span.min())
    m = re.search(r"warm-up: (\d+) request\(s\) started in the 8-s warm-up", res.stdout)
    assert m and int(m.group(1)) == len(warm), res.stdout[-3000:]
    manifest = json.loads((tmp_path / "warm_run.json").read_text())
    assert manifest["warmup"] == {"seconds": 8.0, "users": 48, "rate": None}
    assert manifest["shape"]["class"] == "Steps" and manifest["shape"]["steps"] == [4, 8]

    slos = [parse_slo("ttft_p95_ms=200")]
    steps, capacity, notes = _report(prefix, slos)
    after.to_csv(tmp_path / "cold_requests.csv", index=False)  # the same run without its warm-up rows
    for suffix in ("_server_metrics.csv", "_run.json"):
        shutil.copy(f"{prefix}{suffix}", tmp_path / f"cold{suffix}")
    cold_steps, cold_capacity, _ = _report(tmp_path / "cold", slos)
    assert [s["users"] for s in steps] == [4, 8] and capacity["users"] == 8, capacity
    assert steps == cold_steps
    assert capacity == cold_capacity, {k: (v, cold_capacity.get(k)) for k, v in capacity.items()
                                       if v != cold_capacity.get(k)}
    assert f"{len(warm)} request(s) of the run's warm-up" in " ".join(notes)
    unmarked = tmp_path / "unmarked_requests.csv"  # had the rows not been marked, the slow warm-up would count
    rows.assign(phase="").to_csv(unmarked, index=False)
    first = _report(unmarked, slos)[0][0]
    assert first["users"] == 48 and first["slo_met"] is False


def test_workers_mark_the_warmup_in_their_own_copies(mock_factory, tmp_path):
    """The master's warm-up reaches its workers: their own PREFIX_requests.workerN.csv carry the same
    phase=warmup marks as the master's file (but for requests that started within a message's latency
    of the warm-up's end), so a report made from the workers' copies leaves the warm-up out too."""
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "30", "--itl-ms", "8")
    prefix, port = tmp_path / "dist", str(free_port())
    res = run_locust(["-f", os.path.join(ROOT, "locustfiles", "chat.py"), "--host", mock.url, "--headless",
                      "-u", "4", "-r", "4", "-t", "6s", "--csv", str(prefix), "--processes", "2",
                      "--master-bind-port", port, "--master-port", port, "--warmup-seconds", "4",
                      "--warmup-users", "8", "--ignore-eos", "--output-tokens", "10", "--input-tokens", "20",
                      "--stop-timeout", "5"], tmp_path, timeout=180)
    assert res.returncode == 0, res.stderr[-3000:]
    master = load_rows(prefix)
    copies = pd.concat([pd.read_csv(p) for p in sorted(tmp_path.glob("dist_requests.worker*.csv"))])
    merged = master.merge(copies, on="request_id", suffixes=("", "_own"))
    assert len(merged) == len(master) == len(copies)
    warm = master["phase"] == WARMUP_PHASE
    assert warm.sum() > 10 and (~warm).sum() > 10, master["phase"].value_counts(dropna=False)
    end = master.loc[warm, "start_time"].max()
    clear = (merged["start_time"] - end).abs() > 1.0  # the end reaches a worker one message later
    assert clear.sum() > len(merged) / 2
    mine, own = merged.loc[clear, "phase"].fillna(""), merged.loc[clear, "phase_own"].fillna("")
    assert (mine == own).all(), merged.loc[clear][mine != own][["start_time", "phase", "phase_own"]]
