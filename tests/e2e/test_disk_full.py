"""A disk that fills mid-run: one clear error, the rows already written stay readable, the run
stops by itself. The disk is a small tmpfs mounted for the test (needs root; skipped otherwise).
Also: rows already written are never rewritten by the run that wrote them; a second run with the
same prefix starts a fresh file (issue 10), and ``fresh=False`` appends."""

from __future__ import annotations

import os
import subprocess
import time

import pandas as pd
import pytest

from llmload.metrics.record import CSV_COLUMNS
from llmload.plugin.output.run_files import OutputError, RequestsCsv
from tests.support.locust_runs import CHAT, LOCUST
from tests.support.processes import ROOT

DISK_KB = 128


@pytest.fixture
def small_disk(tmp_path):
    mnt = tmp_path / "disk"
    mnt.mkdir()
    if os.geteuid() != 0:
        pytest.skip(f"mounting a tmpfs needs root (euid {os.geteuid()})")
    res = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={DISK_KB}k", "tmpfs", str(mnt)], capture_output=True,
                         text=True, timeout=10)
    if res.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {res.stderr.strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], capture_output=True, timeout=10)


def test_a_full_disk_stops_the_run_and_keeps_the_rows(small_disk, mock_factory, tmp_path):
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "20", "--itl-ms", "5")
    prefix = small_disk / "full"
    env = {**os.environ, "PYTHONPATH": ROOT}
    t0 = time.monotonic()
    res = subprocess.run([*LOCUST, "-f", CHAT, "--host", mock.url, "--headless", "-u", "4", "-r", "4", "-t", "120s",
                          "--csv", str(prefix), "--output-tokens", "3", "--input-tokens", "10", "--ignore-eos"],
                         cwd=tmp_path, env=env, capture_output=True, text=True, timeout=180)
    took = time.monotonic() - t0
    out = res.stdout + res.stderr
    assert took < 60, f"the run did not stop by itself ({took:.0f} s)"
    assert res.returncode == 1, out[-3000:]
    said = [line for line in out.splitlines() if "No space left on device" in line and "llmload: " in line]
    # the requests file's line stops the run; the other files on that disk (server metrics, the
    # manifest's end) say their own, and whichever came first is the order the writes hit the disk
    rows_said = [line for line in said if f"{prefix}_requests.csv: cannot write: No space left on device" in line]
    assert rows_said and "the run is stopped" in rows_said[0], out[-3000:]
    # Every line of the file is a whole row: pandas and the report read it without a warning.
    with open(f"{prefix}_requests.csv", "rb") as f:
        assert f.read().endswith(b"\n")
    rows = pd.read_csv(f"{prefix}_requests.csv")
    assert list(rows.columns) == list(CSV_COLUMNS) and len(rows) > 100
    assert rows["request_id"].is_unique and set(rows["status"]) <= {"ok", "cancelled"}
    rep = subprocess.run([LOCUST[0], "-m", "llmload.cli", "report", f"{prefix}_requests.csv", "--out",
                          str(tmp_path / "report")], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert rep.returncode == 0 and "cut off" not in rep.stdout, rep.stdout + rep.stderr


def test_a_batch_that_does_not_fit_is_cut_back_and_earlier_rows_stay(small_disk):
    path = str(small_disk / "x_requests.csv")
    out = RequestsCsv(path)
    fields = dict.fromkeys(CSV_COLUMNS)
    fields.update(request_id="r", start_time=1.0, scenario="chat", status="ok", http_status=200, ttft_ms=1.0,
                  e2e_ms=1.0, completion_tokens=1, users=1, worker=0)
    row = tuple(fields[c] for c in CSV_COLUMNS)
    out.write([row] * 10)
    size = os.path.getsize(path)
    with pytest.raises(OutputError, match="No space left on device.*the 10 rows written before stay readable"):
        out.write([row] * 10_000)  # ~1 MB onto a 128 kB disk
    assert os.path.getsize(path) == size  # the failed batch is gone, the first 10 rows untouched
    out.close()
    assert len(pd.read_csv(path)) == 10
    again = RequestsCsv(path, fresh=False)  # appending (not a new run) keeps the rows there
    again.write([row])
    again.close()
    assert len(pd.read_csv(path)) == 11
    new_run = RequestsCsv(path)  # a new run with the same prefix starts a fresh file
    new_run.write([row])
    new_run.close()
    assert len(pd.read_csv(path)) == 1
