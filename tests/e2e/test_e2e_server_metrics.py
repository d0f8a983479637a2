"""Server metrics end to end: real `locust --headless` runs against `llmload mock`, its /metrics
read during the run, and `llmload report` saying what limited the server at the knee.

* a step run past the KV capacity of a small profile: KV usage rises step by step, "KV cache";
* a profile whose KV is ample and whose steps slow with the batch: "compute";
* a metrics URL that never answers, one that drips 10 MB: the load is the same as without
  scraping, and there is one warning;
* master + 2 workers: one process scrapes, the master.
"""

from __future__ import annotations

import os
import re
import subprocess

import numpy as np
import pandas as pd
import pytest

from tests.support.locust_runs import CHAT, LOCUST, load_rows, report, run_locust
from tests.support.metric_scrapes import scrapes
from tests.support.metrics_endpoints import dead_endpoint, dripping_endpoint, static_endpoint
from tests.support.processes import ROOT, free_port
from tests.support.server_checks import assert_same_requests_and_no_negative_gap

STEPS = os.path.join(ROOT, "locustfiles", "steps.py")
STEP_RUN = ["--headless", "--step-seconds", "6", "--ignore-eos", "--output-tokens", "50", "--input-tokens", "200",
            "--server-metrics-interval", "1", "--stop-timeout", "5"]




def test_a_step_run_past_the_kv_capacity_is_limited_by_the_kv_cache(mock_factory, tmp_path):
    """Each request holds 200 + 50 tokens of a 3,100-token cache: 12 fit. Past 12 users requests
    wait for memory while every slot is free (256 of them)."""
    mock = mock_factory("--profile", "kv-limited", "--kv-capacity-tokens", "3100")
    prefix = tmp_path / "kv"
    res = run_locust(["-f", STEPS, "--host", mock.url, "--csv", str(prefix), "--steps", "4,8,12,20", *STEP_RUN],
                     tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "reading server metrics from " + mock.url + "/metrics (vllm)" in res.stderr  # the default: the host's
    data = report(prefix, tmp_path, "ttft_p95_ms=300")
    steps = data["steps"]
    assert [s["users"] for s in steps] == [4, 8, 12, 20]
    kv = [s["server"]["kv_usage"]["mean"] for s in steps]
    assert kv[0] < kv[1] < kv[2] <= kv[3] + 0.02, kv                   # rising step by step
    # each user in flight holds 250 tokens; one between its requests holds none, so a busy client lowers
    # the mean (0.585 for 8 users' 0.645 once: 7.3 in flight) and nothing raises it
    for users, usage in ((4, kv[0]), (8, kv[1])):
        assert 0.8 <= usage / (users * 250 / 3100) <= 1.05, (users, kv)
    assert steps[3]["server"]["running"]["max"] == 12 and steps[3]["server"]["waiting"]["mean"] >= 4
    cap = data["capacity"]
    assert cap["users"] == 12 and "ttft_p95_ms" in cap["limited_by"], cap
    knee = cap["server_limited_by"]
    assert knee["limited_by"] == "kv_cache" and knee["users"] == 20 and knee["above_capacity"], knee
    assert knee["evidence"]["kv_usage_max"] >= 0.95 and knee["evidence"]["waiting_mean"] >= 4
    assert knee["reason"].startswith("KV cache: usage peaked at 9")
    assert "Limited by (server side): KV cache — at the first step above capacity (20)" in data["_md"]
    assert_same_requests_and_no_negative_gap(steps)  # the queue at 20 users: TTFTs of seconds across the edges
    for s in steps:  # vLLM counts tokens as it goes: the rates agree with the client's
        sv = s["server"]
        assert sv["output_tps"] == pytest.approx(sv["client_output_tps"], rel=0.25), s["users"]


def test_ample_kv_and_steps_that_slow_with_the_batch_are_compute(mock_factory, tmp_path):
    """Each decode step takes 8 ms + 1.5 ms per running sequence; the cache never fills."""
    mock = mock_factory("--profile", "compute-bound", "--metrics-format", "sglang")
    prefix = tmp_path / "compute"
    res = run_locust(["-f", STEPS, "--host", mock.url, "--csv", str(prefix), "--steps", "4,8,16,32", *STEP_RUN],
                     tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "(sglang)" in res.stderr
    data = report(prefix, tmp_path, "tpot_p95_ms=45")
    steps = data["steps"]
    assert [s["users"] for s in steps] == [4, 8, 16, 32]
    knee = data["capacity"]["server_limited_by"]
    assert knee["limited_by"] == "compute", knee
    cap = data["capacity"]["users"]  # None once at load average 6: 24 and 28 ok requests at 4 and 8 users (< 30)
    assert knee["above_capacity"] and (cap is None or knee["users"] > cap), (knee, data["capacity"])
    ev = knee["evidence"]
    assert ev["kv_usage_max"] < 0.01 and ev["tpot_growth"] >= 1.5, ev
    assert "each decode step slows as the batch grows" in knee["reason"]
    running = [s["server"]["running"]["max"] for s in steps]
    assert running[-1] == 32 and all(s["server"]["engine"] == "sglang" for s in steps)
    assert_same_requests_and_no_negative_gap(steps)
    # the first step has no lighter one to compare with: it proves nothing about compute
    assert steps[0]["server"]["verdict"]["limited_by"] == "not_enough_evidence", steps[0]["server"]["verdict"]


def summary(prefix) -> dict[str, float]:
    ok = load_rows(prefix).query("status == 'ok'")
    ttft = np.percentile(ok["ttft_ms"], [50, 75, 95])
    return {"ok": len(ok), "ttft_p50": float(ttft[0]), "ttft_p75": float(ttft[1]), "ttft_p95": float(ttft[2]),
            "tpot_p50": float(np.percentile(ok["tpot_ms"], 50))}


def warnings_about(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if "server metrics from" in line]


def test_a_dead_or_huge_metrics_endpoint_does_not_touch_the_load(mock_factory, tmp_path):
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "30", "--itl-ms", "8")
    common = ["-f", CHAT, "--host", mock.url, "-u", "8", "-r", "8", "-t", "6s", "--stop-timeout", "3",
              "--headless", "--ignore-eos", "--output-tokens", "40", "--input-tokens", "50",
              "--server-metrics-interval", "1"]
    base = run_locust([*common, "--csv", str(tmp_path / "base"), "--no-server-metrics"], tmp_path)
    assert base.returncode == 0, base.stderr[-3000:]
    assert not warnings_about(base.stderr) and "server metrics" not in base.stderr
    runs = {}
    with dead_endpoint() as dead, dripping_endpoint(total=10 << 20) as drip:
        for name, url in (("dead", dead), ("drip", drip.url)):
            res = run_locust([*common, "--csv", str(tmp_path / name), "--server-metrics", url], tmp_path)
            assert res.returncode == 0, res.stderr[-3000:]
            runs[name] = res
    b = summary(tmp_path / "base")
    print("no scraping:", b)
    for name, res in runs.items():
        said = warnings_about(res.stderr)
        assert len(said) == 1, said                     # one warning, not one per scrape
        m = summary(tmp_path / name)
        print(f"{name}:", m)
        # A scrape that held the loop for its 1-s timeout every 1-s interval would halve the requests; a
        # busy host moves a 6-s run's count by itself (112 against 136 beside a fresh machine's compile)
        assert abs(m["ok"] - b["ok"]) <= max(8, 0.25 * b["ok"]), (name, m, b)
        # The body of the distribution: ~130 requests' p95 is a handful of them, and on this shared
        # 2-core machine a few scheduling hiccups move it by tens of ms with or without scraping (a
        # p75 of 39 against 33 ms was seen while a compiler and pip ran beside). A scrape that blocked
        # the client's loop would hold every stream for its 1-s timeout: hundreds of ms on the body.
        for k in ("ttft_p50", "ttft_p75"):
            assert abs(m[k] - b[k]) <= max(15.0, 0.3 * b[k]), (name, k, m, b)
        assert abs(m["tpot_p50"] - b["tpot_p50"]) <= 0.5, (name, m, b)
        up = pd.read_csv(tmp_path / f"{name}_server_metrics.csv").query("metric == 'up'")
        assert len(up) >= 5 and (up["value"] == 0).all()  # it kept trying, quietly
    assert "no complete answer within 1 s" in warnings_about(runs["dead"].stderr)[0]
    assert re.search(r"over the 2097152-byte cap|no complete answer", warnings_about(runs["drip"].stderr)[0])
    assert drip.hits and max(drip.sent) < 10 << 20     # never read to the end


def test_master_and_two_workers_scrape_once_on_the_master(mock_factory, tmp_path):
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "30", "--itl-ms", "8")
    port = free_port()
    prefix = tmp_path / "dist"
    with static_endpoint({"/metrics": scrapes("vllm")[1][1].encode()}) as ep:
        # every process is told where to scrape: only the master may do it
        env = {**os.environ, "PYTHONPATH": ROOT, "LLMLOAD_SERVER_METRICS": ep.url + "/metrics",
               "LLMLOAD_SERVER_METRICS_INTERVAL": "0.5"}
        workers = [subprocess.Popen([*LOCUST, "-f", CHAT, "--worker", "--master-port", str(port)], cwd=tmp_path,
                                    env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                   for _ in range(2)]
        master = subprocess.Popen([*LOCUST, "-f", CHAT, "--master", "--master-bind-port", str(port),
                                   "--expect-workers", "2", "--host", mock.url, "-u", "6", "-r", "6", "-t", "4s",
                                   "--headless", "--csv", str(prefix), "--stop-timeout", "3", "--ignore-eos",
                                   "--output-tokens", "20", "--input-tokens", "30"],
                                  cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            _, master_err = master.communicate(timeout=90)
            worker_err = [w.communicate(timeout=30)[1] for w in workers]
        finally:
            for p in (master, *workers):
                if p.poll() is None:
                    p.kill()
    assert master.returncode == 0, master_err[-3000:]
    pids = {re.search(r"pid (\d+)", ua).group(1) for _, ua in ep.hits}
    assert pids == {str(master.pid)}, (pids, master.pid)
    assert 6 <= len(ep.hits) <= 40, len(ep.hits)  # every 0.5 s for the run and its stop
    assert not any("server metrics" in e for e in worker_err)
    up = pd.read_csv(f"{prefix}_server_metrics.csv").query("metric == 'up'")
    assert len(up) == len(ep.hits) and (up["value"] == 1).all()
    assert (load_rows(prefix)["status"] == "ok").sum() > 0
