"""Live control end to end: the SLO stop finds a known capacity; a starved client is flagged."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pandas as pd

from tests.support.locust_runs import KNOWN_CAPACITY_MOCK, load_rows, run_locust
from tests.support.processes import ROOT


def test_slo_stop_ends_the_run_near_the_known_capacity(mock_factory, tmp_path):
    """16 sequences fit (TTFT ≈ 40 ms up to 16 users); from 20 users on, requests queue for a free
    slot (measured TTFT p95 ≈ 260 ms at 20 users, ≈ 540 ms at 24), so a 200 ms TTFT p95 SLO makes
    16 users the capacity. The step shape must stop within one step of the 20-user step. The stop
    judges each step as the report does (after a 2-s warm-up, 30 ok requests at least): 8-s steps
    give every step that."""
    mock = mock_factory(*KNOWN_CAPACITY_MOCK)
    prefix = tmp_path / "stop"
    res = run_locust(["-f", os.path.join(ROOT, "locustfiles", "steps.py"), "--host", mock.url, "--headless",
                      "--csv", str(prefix), "--steps", "4,8,12,16,20,24,28,32", "--step-seconds", "8",
                      "--search-warmup-s", "2", "--slo", "ttft_p95_ms=200", "--slo-stop-after", "3", "--ignore-eos",
                      "--output-tokens", "40", "--input-tokens", "20", "--stop-timeout", "5"], tmp_path, timeout=150)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = load_rows(prefix)
    assert rows["users"].max() in (20, 24)  # stopped within one step of the first broken one
    span = rows["start_time"].max() - rows["start_time"].min()
    assert span < 8 * 8 - 8  # well before the schedule's end
    m = re.search(r"SLO stop: (.*?) at (\d+) users; last step that met every SLO: (\d+) users", res.stdout)
    assert m, res.stdout[-2000:]
    assert "ttft_p95_ms" in m.group(1) and int(m.group(3)) in (12, 16)
    # The report judges the steps as the stop did (its warm-up from PREFIX_run.json): the same last good step.
    rep = subprocess.run([sys.executable, "-m", "llmload.cli", "report", str(prefix), "--slo", "ttft_p95_ms=200"],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert rep.returncode == 0, rep.stderr
    data = json.loads((tmp_path / "stop_report.json").read_text())
    assert data["warmup_s"] == 2.0 and data["capacity"]["users"] == int(m.group(3)), data["capacity"]
    hist = pd.read_csv(f"{prefix}_llm_history.csv")
    assert {"time", "scenario", "users", "in_flight", "rps", "output_tps", "ttft_p50_ms", "ttft_p95_ms",
            "ttft_p99_ms", "tpot_p50_ms", "itl_p99_ms", "errors", "client_limited"} <= set(hist.columns)
    assert hist["users"].max() >= 16 and hist["ttft_p95_ms"].max() > 200


BURNER = """
import time

import gevent
from locust import User, constant, task

from llmload import LLMUser


class ChatUser(LLMUser):
    scenario = "chat"


class Burner(User):
    fixed_count = 1
    wait_time = constant(0)

    @task
    def burn(self):
        t = time.perf_counter()
        while time.perf_counter() - t < 0.08:  # 80 ms of CPU at a time: the loop cannot keep up
            pass
        gevent.sleep(0)
"""


def test_a_starved_client_is_flagged_as_client_limited(mock_factory, tmp_path):
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "30", "--itl-ms", "5")
    lf = tmp_path / "burner.py"
    lf.write_text(BURNER)
    prefix = tmp_path / "starved"
    res = run_locust(["-f", str(lf), "--host", mock.url, "--headless", "-u", "5", "-r", "5", "-t", "7s", "--csv",
                      str(prefix), "--output-tokens", "20", "--input-tokens", "20"], tmp_path,
                     boosted=True)  # the burner must get its core on a loaded machine: it is what starves the loop
    assert res.returncode == 0, res.stderr[-3000:]
    assert "CLIENT-LIMITED" in res.stdout, res.stdout[-2000:]
    hist = pd.read_csv(f"{prefix}_llm_history.csv")
    # the burner holds its process's core (90-100 % quiet; 55-75 % with other work on both cores)
    assert hist["client_limited"].any() and hist["client_cpu_max"].max() > 50


def test_steps_with_a_locustfile_without_a_shape_runs_the_step_shape(mock_factory, tmp_path):
    """Issue 32, item 1: `locust -f locustfiles/chat.py --steps 2,4 --step-seconds 5` printed "No run time
    limit set" and ran one user until it was killed. Now llmload runs its step shape, says so, and the run
    ends by itself after the two steps, with 2 and then 4 users."""
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "20", "--itl-ms", "2")
    prefix = tmp_path / "x"
    res = run_locust(["-f", os.path.join(ROOT, "locustfiles", "chat.py"), "--headless", "--host", mock.url,
                      "--steps", "2,4", "--step-seconds", "3", "--csv", str(prefix), "-u", "9", "--stop-timeout", "5",
                      "--input-tokens", "20", "--output-tokens", "10"], tmp_path, timeout=90)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-3000:]
    assert ("llmload: --steps 2,4: the locustfile has no load shape, so llmload runs its step shape (StepLoadShape) "
            "with the options given; -u does not apply to it") in out, out[-3000:]
    assert "No run time limit set" not in out and "Shape test completed" in out
    rows = load_rows(prefix)
    assert sorted(set(rows["users"])) == [2, 4], sorted(set(rows["users"]))
    manifest = json.loads((tmp_path / "x_run.json").read_text())
    assert manifest["shape"]["class"] == "StepLoadShape" and manifest["shape"]["steps"] == [2, 4]
