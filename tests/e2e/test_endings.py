"""Every way a distributed run ends keeps every row: a shape that ends, the web UI's Stop, SIGINT
and SIGTERM on the master (``-t`` is test_e2e_locust's). A master and two worker processes on
127.0.0.1; afterwards every request the server saw has exactly one row, ok or cancelled.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import urllib.parse
import urllib.request

import pandas as pd
import pytest

from tests.support.locust_runs import CHAT, LOCUST, load_rows
from tests.support.netns import SPAWNED
from tests.support.processes import ROOT, free_port

STEPS = os.path.join(ROOT, "locustfiles", "steps.py")
COMMON = ["--ignore-eos", "--output-tokens", "40", "--input-tokens", "50-80"]


@pytest.fixture
def mock(mock_factory):
    return mock_factory("--profile", "fixed", "--ttft-ms", "30", "--itl-ms", "8")


def wait_for(path: str, text: str | tuple[str, ...], timeout: float) -> str:
    texts = (text,) if isinstance(text, str) else text
    deadline = time.monotonic() + timeout
    content = ""
    while time.monotonic() < deadline:
        with open(path, errors="replace") as f:
            content = f.read()
        if any(t in content for t in texts):
            return content
        time.sleep(0.1)
    raise TimeoutError(f"{path}: no {text!r} within {timeout} s:\n{content[-3000:]}")


def check_rows_against_log(prefix, mock) -> pd.DataFrame:
    rows = load_rows(prefix)
    log = mock.log_by_id(expect=len(rows))
    assert not rows["request_id"].duplicated().any()
    assert set(rows["request_id"]) == set(log), (f"{len(rows)} rows, {len(log)} requests the server saw; "
                                                 f"missing {len(set(log) - set(rows['request_id']))}")
    assert set(rows["status"]) <= {"ok", "cancelled"}
    ok = set(rows.loc[rows["status"] == "ok", "request_id"])
    completed = {rid for rid, e in log.items() if e["outcome"] == "completed"}
    # A stream the server finished just as the client cut it off is the client's `cancelled`.
    assert ok <= completed and completed - ok <= set(rows.loc[rows["status"] == "cancelled", "request_id"])
    return rows


@pytest.mark.parametrize("ending", ["shape", "webui_stop", "sigint", "sigterm"])
def test_every_ending_keeps_every_row(ending, mock, tmp_path):
    env = {**os.environ, "PYTHONPATH": ROOT}
    port = free_port()
    prefix = tmp_path / "end"
    locustfile = STEPS if ending == "shape" else CHAT
    workers = [subprocess.Popen([*LOCUST, "-f", locustfile, "--worker", "--master-port", str(port)], cwd=tmp_path,
                                env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL) for _ in range(2)]
    log_path = tmp_path / "master.log"
    args = [*LOCUST, "-f", locustfile, "--master", "--master-bind-port", str(port), "--expect-workers", "2",
            "--host", mock.url, "--csv", str(prefix), *COMMON]
    web_port = free_port()
    if ending == "shape":
        args += ["--headless", "--steps", "4,8", "--step-seconds", "3", "--step-spawn-rate", "8"]
    elif ending == "webui_stop":
        args += ["--web-host", "127.0.0.1", "--web-port", str(web_port)]
    else:
        args += ["--headless", "-u", "8", "-r", "8", "-t", "60s"]
    with open(log_path, "w") as out:
        master = subprocess.Popen(args, cwd=tmp_path, env=env, stdout=out, stderr=subprocess.STDOUT)
    try:
        if ending == "webui_stop":
            wait_for(str(log_path), "2 workers connected", 60)
            base = f"http://127.0.0.1:{web_port}"
            form = urllib.parse.urlencode({"user_count": 8, "spawn_rate": 8, "host": mock.url}).encode()
            urllib.request.urlopen(urllib.request.Request(f"{base}/swarm", data=form), timeout=10).read()
            wait_for(str(log_path), SPAWNED, 30)
            time.sleep(3)
            urllib.request.urlopen(urllib.request.Request(f"{base}/stop", data=b"", method="POST"), timeout=30).read()
            deadline = time.monotonic() + 30  # the master collects the workers' final rows, then writes its stats
            while not os.path.exists(f"{prefix}_llm_stats.csv") and time.monotonic() < deadline:
                time.sleep(0.1)
            assert os.path.exists(f"{prefix}_llm_stats.csv")
            rows = check_rows_against_log(prefix, mock)
            assert master.poll() is None  # Stop ends the test, not Locust
            master.send_signal(signal.SIGTERM)
        elif ending in ("sigint", "sigterm"):
            wait_for(str(log_path), SPAWNED, 60)
            time.sleep(3)
            master.send_signal(signal.SIGINT if ending == "sigint" else signal.SIGTERM)
        rc = master.wait(60)
        for w in workers:
            w.wait(30)
    finally:
        for p in (master, *workers):
            if p.poll() is None:
                p.kill()
                p.wait(10)
    text = log_path.read_text(errors="replace")
    assert rc == 0, text[-3000:]
    rows = check_rows_against_log(prefix, mock)
    assert set(rows["worker"]) == {0, 1}
    if ending != "webui_stop":
        assert "LLM summary" in text and "LOST WORKER" not in text
    if ending in ("sigint", "sigterm"):
        # Cut off mid-stream: some were in flight, and they are rows too.
        assert (rows["status"] == "cancelled").sum() >= 1, rows["status"].value_counts()
