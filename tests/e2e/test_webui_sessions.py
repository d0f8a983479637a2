"""Several tests in one web-UI session with --csv keep every test's manifest, history and stats, and
`llmload report --run-id` finds each (issue 19, row 11)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.parse
import urllib.request

import pandas as pd

from tests.support.browser import wait_for
from tests.support.processes import ROOT, free_port


def _post(url: str, form: dict[str, str]) -> None:
    data = urllib.parse.urlencode(form).encode()
    urllib.request.urlopen(urllib.request.Request(url, data=data, method="POST"), timeout=10).read()


def test_two_tests_in_one_session_keep_both_runs(mock_factory, tmp_path):
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "20", "--itl-ms", "5")
    port = free_port()
    prefix = tmp_path / "ui"
    locust = subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", os.path.join(ROOT, "locustfiles", "chat.py"), "--host", mock.url,
         "--web-host", "127.0.0.1", "--web-port", str(port), "--csv", str(prefix), "--output-tokens", "10",
         "--input-tokens", "20", "--no-server-metrics"],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": ROOT}, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
        text=True)
    base = f"http://127.0.0.1:{port}"
    run_ids = []
    manifest = tmp_path / "ui_run.json"
    try:
        wait_for(lambda: urllib.request.urlopen(base + "/", timeout=5).status == 200)
        for _ in range(2):
            _post(base + "/swarm", {"user_count": "2", "spawn_rate": "2", "host": mock.url})
            wait_for(lambda: manifest.exists() and json.loads(manifest.read_text())["run_id"] not in run_ids)
            run_ids.append(json.loads(manifest.read_text())["run_id"])
            time.sleep(3)
            _post(base + "/stop", {})
            wait_for(lambda: json.loads(manifest.read_text()).get("end") is not None, timeout=30)
    finally:
        locust.terminate()
        locust.communicate(timeout=30)
    first, second = run_ids
    assert json.loads((tmp_path / "ui_run.json").read_text())["run_id"] == second
    assert json.loads((tmp_path / f"ui_run.{first}.json").read_text())["run_id"] == first
    assert (tmp_path / f"ui_llm_stats.{first}.csv").exists() and (tmp_path / "ui_llm_stats.csv").exists()
    assert (tmp_path / f"ui_llm_history.{first}.csv").exists()
    rows = pd.read_csv(f"{prefix}_requests.csv")
    assert set(rows["run_id"]) == {first, second}
    for run_id in (first, second):
        res = subprocess.run([sys.executable, "-m", "llmload.cli", "report", str(prefix), "--run-id", run_id,
                              "--warmup-s", "0", "--out", str(tmp_path / run_id)], capture_output=True, text=True,
                             cwd=ROOT, timeout=120)
        assert res.returncode == 0, res.stderr
        report = json.loads((tmp_path / run_id / "report.json").read_text())
        assert (report.get("run") or {}).get("run_id") == run_id, res.stdout + res.stderr
        assert "not shown" not in res.stdout + res.stderr
