"""Where workers keep their own copies of their rows (issue 32, item 19): `--processes 2 --csv
some/dir/big` put `big_requests.worker0.csv` and `worker1.csv` in the directory Locust was started
from, not beside `some/dir/big_requests.csv`; so did workers started by hand. On one host the copies
go beside the master's files; a worker that does not see the master's directory (another host: here
a worker in a mount namespace of its own, the master's directory hidden under a tmpfs) puts them under
the same relative path in its working directory; the master's summary says where each one is."""

from __future__ import annotations

import os
import re
import shutil
import subprocess

import pandas as pd
import pytest

from tests.support.locust_runs import CHAT, LOCUST, load_rows, run_locust
from tests.support.processes import ROOT, free_port

COMMON = ["-f", CHAT, "--headless", "-u", "4", "-r", "4", "-t", "4s", "--stop-timeout", "5", "--ignore-eos",
          "--output-tokens", "20", "--input-tokens", "30", "--csv", "some/dir/big"]
ENV = {**os.environ, "PYTHONPATH": ROOT}


@pytest.fixture
def mock(mock_factory):
    return mock_factory("--profile", "fixed", "--ttft-ms", "20", "--itl-ms", "4")


def _copies(folder) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*_requests.worker*.csv"))


def _said(out: str) -> dict[str, tuple[str, str]]:
    """worker index → (path, why) from the master's summary."""
    lines = re.findall(r"llmload: worker (\d+)(?: on host \S+)? \(\S+\) keeps its own copy of its rows in (\S+) "
                       r"\((.*)\)", out)
    return {i: (path, why) for i, path, why in lines}


def _every_row_is_in_a_copy(master_prefix, copies) -> None:
    rows = load_rows(master_prefix)
    copied = pd.concat([pd.read_csv(c, dtype={"request_id": str}) for c in copies])
    assert set(copied["request_id"]) == set(rows["request_id"]) and len(rows) > 4


def test_processes_keep_their_copies_beside_the_csv_path(mock, tmp_path):
    port = str(free_port())
    res = run_locust([*COMMON, "--host", mock.url, "--processes", "2", "--master-bind-port", port, "--master-port",
                      port], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    assert _copies(tmp_path) == ["some/dir/big_requests.worker0.csv", "some/dir/big_requests.worker1.csv"]
    _every_row_is_in_a_copy(tmp_path / "some" / "dir" / "big", [tmp_path / c for c in _copies(tmp_path)])
    said = _said(res.stdout)
    assert said == {str(i): (str(tmp_path / "some" / "dir" / f"big_requests.worker{i}.csv"), "beside these files")
                    for i in (0, 1)}, res.stdout[-2000:]


def _master_and_workers(mock, master_dir, worker_dir, wrap: list[str] = ()) -> subprocess.CompletedProcess:
    port = free_port()
    workers = [subprocess.Popen([*wrap, *LOCUST, "-f", CHAT, "--worker", "--master-port", str(port)], cwd=worker_dir,
                                env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
               for _ in range(2)]
    try:
        res = run_locust([*COMMON, "--master", "--master-bind-port", str(port), "--expect-workers", "2",
                          "--host", mock.url], master_dir)
    finally:
        for w in workers:
            try:
                w.communicate(timeout=30)
            except subprocess.TimeoutExpired:
                w.kill()
                w.communicate()
    assert res.returncode == 0, res.stderr[-3000:]
    return res


def test_workers_started_by_hand_on_this_host_write_beside_the_masters_files(mock, tmp_path):
    master_dir, worker_dir = tmp_path / "master", tmp_path / "worker"
    master_dir.mkdir()
    worker_dir.mkdir()
    res = _master_and_workers(mock, master_dir, worker_dir)
    assert _copies(worker_dir) == []  # nothing in the workers' own working directory
    assert _copies(master_dir) == ["some/dir/big_requests.worker0.csv", "some/dir/big_requests.worker1.csv"]
    _every_row_is_in_a_copy(master_dir / "some" / "dir" / "big", [master_dir / c for c in _copies(master_dir)])
    assert {why for _, why in _said(res.stdout).values()} == {"beside these files"}, res.stdout[-2000:]


def test_a_worker_that_cannot_see_the_masters_directory_uses_the_same_relative_path(mock, tmp_path):
    """Another host, as far as files go: each worker runs in a mount namespace where the master's
    directory is an empty tmpfs."""
    master_dir, worker_dir = tmp_path / "master", tmp_path / "worker"
    master_dir.mkdir()
    worker_dir.mkdir()
    unshare = shutil.which("unshare")
    probe = (subprocess.run([unshare, "-m", "--propagation", "private", "true"], capture_output=True)
             if unshare else None)
    if probe is None or probe.returncode != 0:
        pytest.skip("needs unshare -m (a mount namespace: root) to hide the master's directory from its workers")
    hide = [unshare, "-m", "--propagation", "private", "sh", "-c", f'mount -t tmpfs tmpfs "{master_dir}" && exec "$@"',
            "hide"]
    res = _master_and_workers(mock, master_dir, worker_dir, hide)
    assert _copies(worker_dir) == ["some/dir/big_requests.worker0.csv", "some/dir/big_requests.worker1.csv"]
    assert _copies(master_dir) == []  # the tmpfs the workers wrote nothing into is gone with them
    _every_row_is_in_a_copy(master_dir / "some" / "dir" / "big", [worker_dir / c for c in _copies(worker_dir)])
    said = _said(res.stdout)
    assert said == {str(i): (str(worker_dir / "some" / "dir" / f"big_requests.worker{i}.csv"),
                             "the master's --csv path, under its working directory") for i in (0, 1)}, \
        res.stdout[-2000:]
