"""Who may join: with --cluster-token on the master, a worker without it is refused, named in the
log and the summary, and none of its rows reach the files (issue 19, the ZeroMQ join)."""

from __future__ import annotations

import os
import subprocess
import time

from tests.support.locust_runs import CHAT, LOCUST, load_rows, run_locust
from tests.support.processes import ROOT, free_port

COMMON = ["--headless", "-t", "4s", "--ignore-eos", "--output-tokens", "20", "--input-tokens", "30"]


def test_a_worker_without_the_token_is_refused(mock_factory, tmp_path):
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "20", "--itl-ms", "5")
    port = free_port()
    prefix = tmp_path / "tok"
    base_env = {**os.environ, "PYTHONPATH": ROOT}
    good = subprocess.Popen([*LOCUST, "-f", CHAT, "--worker", "--master-port", str(port)], cwd=tmp_path,
                            env={**base_env, "LLMLOAD_CLUSTER_TOKEN": "s3cret-join"}, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    (tmp_path / "rogue").mkdir()
    rogue = subprocess.Popen([*LOCUST, "-f", CHAT, "--worker", "--master-port", str(port)], cwd=tmp_path / "rogue",
                             env=base_env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        t0 = time.monotonic()
        res = run_locust(["-f", CHAT, "--master", "--master-bind-port", str(port), "--expect-workers", "2",
                          "--host", mock.url, "-u", "8", "-r", "8", "--csv", str(prefix), "--stop-timeout", "3",
                          "--cluster-token", "s3cret-join", *COMMON], tmp_path)
        took = time.monotonic() - t0
    finally:
        for w in (good, rogue):
            try:
                w.wait(20)
            except subprocess.TimeoutExpired:
                w.kill()
    assert res.returncode == 0, res.stderr[-3000:]
    rows = load_rows(prefix)
    log = mock.log_by_id(expect=len(rows) + 1)
    assert len(rows) and set(rows["request_id"]) < set(log)  # the rogue's requests reached the server ...
    assert rows["worker"].nunique() == 1  # ... but only the good worker's rows are in the file
    assert "REFUSED WORKER" in res.stdout and "did not present this master's --cluster-token" in res.stderr
    assert took < 60  # the master did not wait for the refused worker's final data
    manifest = (tmp_path / "tok_run.json").read_text()
    assert "s3cret-join" not in manifest
