"""Server metrics against a real engine: llama.cpp's llama-server (the harness of tests/llamacpp.py,
``--metrics`` on, 4 slots, a tiny random-weight model). A short Locust run finds its /metrics
on its own, maps it (llama.cpp names → common names) and the counters match the client's rows
token for token."""

from __future__ import annotations

import os

import pandas as pd
import pytest

from llmload.server_metrics import parse_exposition, snapshot
from llmload.server_metrics.fetch import fetch
from tests.support.locust_runs import CHAT, load_rows, report, run_locust

try:
    from tests.support.llamacpp import llama_server_fixture, tiny_model_fixture  # noqa: F401  (the fixtures)
except ModuleNotFoundError as e:  # the harness lives on the llamacpp branch until the lead merges it
    pytest.skip(f"no llama.cpp harness in this tree (tests/llamacpp.py: {e}); the recorded llama.cpp /metrics "
                "are tested in tests/unit/test_server_series.py", allow_module_level=True)


def counters(url: str) -> dict[str, float]:
    return snapshot(parse_exposition(fetch(url + "/metrics", 10.0), source=url)).counters


def test_llama_server_metrics_are_read_mapped_and_agree_with_the_client(llama_server, tmp_path):
    before = counters(llama_server.url)
    prefix = tmp_path / "llama"
    res = run_locust(["-f", CHAT, "--host", llama_server.url, "-u", "12", "-r", "12", "-t", "6s", "--headless",
                      "--csv", str(prefix), "--stop-timeout", "120", "--output-tokens", "64", "--input-tokens", "40",
                      "--server-metrics-interval", "1", "--model", llama_server.model_alias], tmp_path, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    assert f"reading server metrics from {llama_server.url}/metrics (llamacpp)" in res.stderr
    after = counters(llama_server.url)
    rows = load_rows(prefix)
    ok = rows[rows["status"] == "ok"]
    assert len(ok) == len(rows) > 0
    # llama.cpp counts a request's tokens when it ends; every one ended before `after`
    assert after["generation_tokens"] - before["generation_tokens"] == ok["completion_tokens"].sum()
    assert after["prompt_tokens"] - before["prompt_tokens"] == ok["prompt_tokens"].sum()  # cached ones included
    assert after["prefix_cache_hits_tokens"] - before["prefix_cache_hits_tokens"] == ok["cached_tokens"].sum()
    csv = pd.read_csv(f"{prefix}_server_metrics.csv")
    up = csv[csv["metric"] == "up"]
    # every answered scrape names the engine; one the busy server did not answer in time is up=0,
    # unlabelled (written, not hidden). How many it answers is llama-server's: 0.7 at load 8, 0.43 with a
    # second llama-server and a busy loop on one core; every scrape of the 1-s interval is written.
    assert set(up[up["value"] == 1]["labels"]) == {'engine="llamacpp"'}
    assert up["labels"][up["value"] == 0].isna().all() and (up["value"] == 1).sum() >= 2
    assert len(up) >= 5  # a 6-s run scraped every second (the first and last at the run's edges)
    running = csv[csv["metric"] == "requests_running"]["value"]
    waiting = csv[csv["metric"] == "requests_waiting"]["value"]
    # 12 users on 4 slots: the slots fill and the rest are deferred (two in three wait at any time)
    assert running.max() == llama_server.n_slots and waiting.max() >= 1
    assert {"llamacpp:n_decode_total", "llamacpp:prompt_seconds_total"} <= set(csv["metric"])  # kept raw
    data = report(prefix, tmp_path)
    server = data["steps"][0]["server"]
    assert server["engine"] == "llamacpp" and server["running"]["max"] == llama_server.n_slots
    assert server["verdict"]["limited_by"] == "queueing", server["verdict"]  # slots, not memory
    assert "does not report KV usage" in server["verdict"]["reason"]
    assert os.path.exists(tmp_path / "report" / "report.html")
