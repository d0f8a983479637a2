"""The web UI's llmload routes over plain HTTP (the browser test draws them): a run started and
stopped from the API shows as stopped in the LLM tab, the server's metrics reach the tab and the
dashboard's data, and without --csv the downloads say so or come from memory."""

from __future__ import annotations

import csv
import io
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request

import pytest

from tests.support.browser import wait_for
from tests.support.processes import ROOT, end_process, free_port


def get(url: str) -> tuple[int, str, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.headers.get("Content-Type", ""), r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("Content-Type", ""), e.read().decode()


def post(url: str, form: dict[str, str]) -> int:
    data = urllib.parse.urlencode(form).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data=data, method="POST"), timeout=10) as r:
        return r.status


def test_stop_without_csv_shows_the_run_stopped_and_serves_what_it_has(mock_factory, tmp_path):
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "40", "--itl-ms", "10")
    port = free_port()
    locust = subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", os.path.join(ROOT, "locustfiles", "chat.py"), "--host", mock.url,
         "--web-host", "127.0.0.1", "--web-port", str(port), "--output-tokens", "20", "--input-tokens", "30",
         "--server-metrics-interval", "1"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": ROOT}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        page = wait_for(lambda: get(base + "/")[0] == 200 and get(base + "/")[2])
        # the Download Data links say what needs --csv
        assert "Download llmload per-request CSV (not recorded: start Locust with --csv PREFIX)" in page
        assert "Download llmload server metrics CSV (not recorded" in page
        assert post(base + "/swarm", {"user_count": "3", "spawn_rate": "3", "host": mock.url}) == 200

        def live_row():
            rows = json.loads(get(base + "/llmload/live.json")[2])["rows"]
            ready = rows and rows[0]["ttft_p50_ms"] is not None and not rows[0]["server_ttft"].startswith("–")
            return ready and rows[0]

        row = wait_for(live_row, timeout=30)
        assert row["window"] == "last 10 s" and row["in_flight"] != "stopped"
        running, waiting = row["server_queue"].split(" / ")
        assert 0 <= int(running) <= 3 and waiting == "0"
        assert row["server_kv"] == 0  # the fixed engine has no KV model; a number in the JSON (issue 32, item 18)
        server_ttft, client_ttft = row["server_ttft"].split(" / ")
        assert 40 <= float(server_ttft) < 45 and float(server_ttft) <= float(client_ttft) < 80
        history = json.loads(get(base + "/llmload/history.json")[2])
        assert history["server"] and history["server"][-1]["engine"] == "vllm"
        assert history["server_metrics"] == [mock.url + "/metrics"]
        status, kind, body = get(base + "/llmload/requests.csv")
        assert status == 404 and "start Locust with --csv PREFIX" in body

        assert post(base + "/stop", {}) == 200
        stopped = wait_for(lambda: (rows := json.loads(get(base + "/llmload/live.json")[2])["rows"])
                           and rows[0]["in_flight"] == "stopped" and rows[0])
        assert stopped["window"].startswith("whole run (") and stopped["window"].endswith("s), stopped")
        assert stopped["client"] == "run stopped" and float(stopped["rps"]) > 0
        assert stopped["server_queue"] == "–"
        time.sleep(1.5)  # it stays stopped: no stale live window comes back
        assert json.loads(get(base + "/llmload/live.json")[2])["rows"][0]["in_flight"] == "stopped"
        # without --csv: the stats and the history come from memory
        status, kind, body = get(base + "/llmload/llm_stats.csv")
        assert status == 200 and kind.startswith("text/csv")
        stats = list(csv.DictReader(io.StringIO(body)))
        assert stats[0]["scenario"] == "chat" and int(stats[0]["requests"]) > 0
        status, _, body = get(base + "/llmload/history.csv")
        hist = list(csv.DictReader(io.StringIO(body)))
        assert status == 200 and "chat" in {r["scenario"] for r in hist} and "errors_by_status" in hist[0]
        assert get(base + "/llmload/server_metrics.csv")[0] == 404
    finally:
        end_process(locust)


GRAPH = """
seed: 3
workloads:
  research:
    output_tokens: 8
    ignore_eos: true
    session:
      kind: graph
      calls:
        - {id: plan, new_tokens: 30}
        - {id: a, after: [plan], context: fresh, new_tokens: 20}
        - {id: b, after: [plan], context: fresh, new_tokens: 20}
        - {id: answer, after: [plan, a, b], new_tokens: 10}
"""


def test_the_live_tab_shows_call_graph_session_times(mock_factory, tmp_path):
    """Issue 23: the live view adds session p50 / p95; once stopped, the tab's cell is the stats file's."""
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "40", "--itl-ms", "5")
    scen = tmp_path / "graph.yaml"
    scen.write_text(GRAPH)
    lf = tmp_path / "graph_locustfile.py"
    lf.write_text(f"from llmload import users_from_scenario\nglobals().update(users_from_scenario({str(scen)!r}))\n")
    port = free_port()
    prefix = tmp_path / "ui"
    locust = subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", str(lf), "--host", mock.url, "--web-host", "127.0.0.1",
         "--web-port", str(port), "--csv", str(prefix), "--no-server-metrics"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": ROOT}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True)
    base = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: get(base + "/")[0] == 200)
        assert post(base + "/swarm", {"user_count": "2", "spawn_rate": "2", "host": mock.url}) == 200

        def session_cell():
            rows = json.loads(get(base + "/llmload/live.json")[2])["rows"]
            return rows and rows[0]["in_flight"] != "stopped" and rows[0]["tasks"] != "–" and rows[0]["tasks"]

        p50, p95 = (float(x) for x in wait_for(session_cell, timeout=40).split(" / "))
        assert 0.1 < p50 <= p95 < 5  # three model calls in a row of ~0.08 s each, a few at once
        assert post(base + "/stop", {}) == 200
        stopped = wait_for(lambda: (rows := json.loads(get(base + "/llmload/live.json")[2])["rows"])
                           and rows[0]["in_flight"] == "stopped" and rows[0])
        status, _kind, body = get(base + "/llmload/llm_stats.csv")
        stats = next(csv.DictReader(io.StringIO(body)))
        assert status == 200 and int(stats["tasks"]) >= 1
        assert [float(x) for x in stopped["tasks"].split(" / ")] == pytest.approx(  # 3 significant digits
            [float(stats["median_task_s"]), float(stats["p95_task_s"])], rel=0.01)
    finally:
        end_process(locust)
