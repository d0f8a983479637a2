"""/llmload/metrics end to end: a master (web UI on, autostarted) and two workers run a mix of
scenarios against the mock; after the run, the endpoint parsed with prometheus_client's own parser
counts exactly the requests CSV's rows, per scenario."""

from __future__ import annotations

import os
import subprocess
import time
import urllib.request
from collections import Counter

import pandas as pd
from prometheus_client.parser import text_string_to_metric_families

from tests.support.locust_runs import LOCUST, load_rows
from tests.support.processes import ROOT, free_port

MIXED = os.path.join(ROOT, "locustfiles", "mixed.py")


def _wait_for(path, text: str, timeout: float, proc: subprocess.Popen) -> None:
    """Poll the log (bounded) until ``text`` shows."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if text in path.read_text(errors="replace"):
            return
        assert proc.poll() is None, f"the master ended early; its log ends:\n{path.read_text()[-3000:]}"
        time.sleep(0.2)
    raise AssertionError(f"no {text!r} in {path} within {timeout:g} s:\n{path.read_text()[-3000:]}")


def test_histogram_counts_equal_the_requests_csv_rows_per_scenario(mock_factory, tmp_path):
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "30", "--itl-ms", "5")
    port, web = free_port(), free_port()
    prefix = tmp_path / "mix"
    env = {**os.environ, "PYTHONPATH": ROOT}
    log_path = tmp_path / "master.log"
    with open(log_path, "w") as log:
        master = subprocess.Popen([*LOCUST, "-f", MIXED, "--master", "--master-bind-port", str(port),
                                   "--expect-workers", "2", "--web-host", "127.0.0.1", "--web-port", str(web),
                                   "--autostart", "--autoquit", "60", "-u", "6", "-r", "6", "-t", "5s",
                                   "--host", mock.url, "--csv", str(prefix), "--stop-timeout", "5",
                                   "--output-tokens", "20", "--input-tokens", "30"],
                                  cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT)
    workers = [subprocess.Popen([*LOCUST, "-f", MIXED, "--worker", "--master-port", str(port)], cwd=tmp_path,
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(2)]
    try:
        _wait_for(log_path, "request rows in", 120, master)  # the end-of-run line: every row is in
        with urllib.request.urlopen(f"http://127.0.0.1:{web}/llmload/metrics", timeout=10) as r:
            body = r.read().decode()
    finally:
        for p in (master, *workers):
            p.terminate()
        for p in (master, *workers):
            try:
                p.wait(timeout=30)
            except subprocess.TimeoutExpired:
                p.kill()
    rows = load_rows(prefix)
    assert len(rows) > 20 and rows["scenario"].nunique() >= 2, rows["scenario"].value_counts()
    counts: Counter[str] = Counter()
    requests: Counter[str] = Counter()
    for family in text_string_to_metric_families(body):
        for s in family.samples:
            if s.name == "gen_ai_client_operation_duration_seconds_count":
                counts[s.labels["scenario"]] += s.value
            if s.name == "llmload_requests_total":
                requests[s.labels["scenario"]] += s.value
    by_scenario = rows["scenario"].value_counts().to_dict()
    with_e2e = rows[pd.notna(rows["e2e_ms"])]["scenario"].value_counts().to_dict()
    assert dict(requests) == by_scenario
    assert dict(counts) == with_e2e
