"""`llmload calibrate`: the verdict of a step, the result's JSON, and a short real run."""

from __future__ import annotations

import json
import math
import os
import socket
import subprocess
import sys

from llmload.calibrate.command import TTFT_ERROR_P99_MS, CalibrateSettings, build_result, judge, summary_lines
from llmload.calibrate.groundtruth import row_errors, streams_in_flight, token_times, tokens_between, true_itl_max_ms
from llmload.health.calibration import load_calibration
from llmload.health.stalls import STALL_MS
from tests.support.processes import ROOT


def step(streams: int, **kw) -> dict:
    base = {"streams": streams, "users": streams, "tps": 50.0 * streams, "tps_per_process": 50.0 * streams,
            "expected_tps": 50.0 * streams, "mock_cpu_pct": 30.0, "requests": 100, "ttft_err_p50_ms": 0.02,
            "ttft_err_p99_ms": 0.3, "stall_cpu_max_ms": 0.5}
    s = {**base, **kw}
    s["ok"], s["why"] = judge(s)
    return s


def test_a_step_is_good_only_with_exact_ttft_and_no_stall_of_its_own():
    assert judge(step(64)) == (True, "")
    assert judge(step(64, ttft_err_p99_ms=1.5))[1] == "TTFT error p99 1.50 ms > 1 ms"
    assert judge(step(64, stall_cpu_max_ms=4.0))[1] == "an event-loop stall used 4.0 ms of CPU"
    assert judge(step(64, tps=1000.0, mock_cpu_pct=97.0))[1].startswith("mock-limited")
    busy = judge(step(64, ttft_err_p99_ms=30.0, others_cpu_pct=60.0))[1]
    assert busy.startswith("machine busy: other processes used 60 % of a core") and "TTFT error p99 30.00" in busy
    assert judge(step(64, others_cpu_pct=60.0)) == (True, "")  # a busy neighbour alone is no failure
    assert not judge(step(64, requests=0))[0]
    assert judge(step(64, stall_cpu_max_ms=None))[1].startswith("no client health report")


def test_the_result_names_the_limit_and_the_processes_a_target_needs():
    s = CalibrateSettings(target_tps=100_000.0)
    r = build_result(s, [step(256), step(512), step(1024, ttft_err_p99_ms=3.0), step(768)], [0, 1])
    per = r["per_process"]
    assert per == {"max_tps": 38_400.0, "max_streams": 768, "limit_found": True, "limited_by": "client",
                   "why": "TTFT error p99 3.00 ms > 1 ms"}
    assert r["processes_needed"] == 3 and r["version"] == 1 and r["host"] == socket.gethostname()
    text = "\n".join(summary_lines(r))
    assert "per process: 38,400 tok/s at 768 streams" in text and "--processes 3" in text
    assert "use more machines" in text  # 3 processes on 2 cores
    r = build_result(s, [step(256), step(512, tps=10.0, mock_cpu_pct=99.0)], [0, 1])
    assert r["per_process"]["limited_by"] == "mock" and not r["per_process"]["limit_found"]
    assert "lower bound" in summary_lines(r)[0]
    r = build_result(s, [step(256), step(512, stall_cpu_max_ms=9.0, others_cpu_pct=80.0)], [0, 1])
    assert r["per_process"]["limited_by"] == "machine" and "free the machine" in summary_lines(r)[0]


def test_ground_truth_comparison():
    truth = {"a": {"arrival_mono": 10.0, "first_token_mono": 10.2, "last_token_mono": 10.26,
                   "token_mono": [10.2, 10.22, 10.26]},
             "b": {"arrival_mono": 10.1, "first_token_mono": None, "last_token_mono": None, "token_mono": None}}
    rows = [{"request_id": "a", "status": "ok", "start_time": "100.0", "ttft_ms": "200.5", "itl_max_ms": "40.0"},
            {"request_id": "b", "status": "ok", "start_time": "100.0", "ttft_ms": "1", "itl_max_ms": ""},
            {"request_id": "c", "status": "timeout", "start_time": "100.0", "ttft_ms": "", "itl_max_ms": ""}]
    errs = row_errors(rows, truth)
    assert [round(x, 6) for x in errs["ttft"]] == [0.5] and [round(x, 6) for x in errs["itl_max"]] == [0.0]
    assert row_errors(rows, truth, since_unix=101.0) == {"ttft": [], "itl_max": []}
    times = token_times(truth)
    assert tokens_between(times, 10.21, 10.3) == 2 and round(true_itl_max_ms([1.0, 1.01, 1.05]), 6) == 40.0
    assert round(streams_in_flight(truth, 10.0, 10.3), 3) == round(0.26 / 0.3, 3)


def test_a_short_calibration_writes_json_the_verdict_reads(tmp_path):
    out = tmp_path / "cal.json"
    res = subprocess.run([sys.executable, "-m", "llmload.cli", "calibrate", "--streams", "4,8", "--step-seconds", "2",
                          "--input-tokens", "32", "--output-tokens", "8", "--ttft-ms", "20", "--itl-ms", "10",
                          "--target-tps", "1000", "--out", str(out)],
                         cwd=tmp_path, env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True,
                         timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-2000:]
    assert f"wrote {out}" in res.stdout
    r = json.loads(out.read_text())
    assert r["version"] == 1 and r["host"] == socket.gethostname() and r["cores"] >= 1
    assert r["settings"]["output_tokens"] == 8 and r["settings"]["processes"] == 1
    assert r["steps"] and {x["streams"] for x in r["steps"]} <= {2, 4, 8}
    for x in r["steps"]:
        assert x["requests"] > 0 and x["tps"] > 0 and 0 < x["in_flight"] <= x["users"] + 0.5
        assert x["cpu_pct"] > 0 and x["ttft_err_p99_ms"] is not None and x["ttft_err_p99_ms"] > -0.5
        assert x["stall_cpu_max_ms"] is not None  # the steady state holds at least one health report
        exact = x["ttft_err_p99_ms"] <= TTFT_ERROR_P99_MS and x["stall_cpu_max_ms"] <= STALL_MS
        assert x["ok"] == exact or x["why"].startswith(("mock", "machine busy")), x
    good = [x for x in r["steps"] if x["ok"]]
    per = r["per_process"]
    assert per["max_streams"] == (max(good, key=lambda x: x["tps_per_process"])["streams"] if good else 0)
    assert r["processes_needed"] == (math.ceil(1000 / per["max_tps"]) if per["max_tps"] else None)
    cal = load_calibration(str(out))
    assert cal is not None and cal.max_streams == per["max_streams"] and cal.max_tps == per["max_tps"]
