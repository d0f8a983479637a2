"""Every ending writes every file: a step of a run's start or end that fails is named in one line and
the others still run (issue 19, row 8)."""

from __future__ import annotations

import os

import pytest

from llmload.plugin.run.isolated import run_each
from tests.support.locust_runs import CHAT, load_rows, run_locust


def test_run_each_names_the_failed_step_and_runs_the_rest(caplog):
    done = []

    def boom() -> None:
        raise OSError(28, "No space left on device")

    failed = run_each("the end of the run", [("a", lambda: done.append("a")), ("the manifest", boom),
                                             ("b", lambda: done.append("b"))])
    assert failed == ["the manifest"] and done == ["a", "b"]
    assert "the end of the run: the manifest failed (OSError: [Errno 28] No space left on device)" in caplog.text


def test_a_manifest_that_cannot_be_written_costs_nothing_else(mock_factory, tmp_path):
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "20", "--itl-ms", "5")
    prefix = tmp_path / "run"
    (tmp_path / "run_run.json").mkdir()  # PREFIX_run.json cannot be written, at the start nor at the end
    res = run_locust(["-f", CHAT, "--host", mock.url, "--headless", "-u", "2", "-r", "2", "-t", "3s", "--csv",
                      str(prefix), "--output-tokens", "10", "--input-tokens", "20", "--stop-timeout", "5"], tmp_path)
    assert "the start of the test: the run's files failed" in res.stderr, res.stderr[-3000:]
    assert "the end of the run: PREFIX_run.json's end failed" in res.stderr or "run_run.json" in res.stderr
    assert len(load_rows(prefix)) > 0
    assert (tmp_path / "run_llm_stats.csv").exists() and (tmp_path / "run_llm_history.csv").exists()
    assert "LLM summary" in res.stdout


def test_a_server_metrics_file_on_a_full_disk_costs_nothing_else(mock_factory, tmp_path):
    """ENOSPC in the scraper alone: its file is /dev/full (every write fails with errno 28). One line
    names the file and the reason; the scraper keeps reading for the live view; every other file and
    the summary are written, with no traceback."""
    if not os.path.exists("/dev/full"):
        pytest.skip("no /dev/full on this system")
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "20", "--itl-ms", "5")
    prefix = tmp_path / "run"
    os.symlink("/dev/full", tmp_path / "run_server_metrics.csv")
    res = run_locust(["-f", CHAT, "--host", mock.url, "--headless", "-u", "2", "-r", "2", "-t", "4s", "--csv",
                      str(prefix), "--output-tokens", "10", "--input-tokens", "20", "--stop-timeout", "5",
                      "--server-metrics-interval", "0.5"], tmp_path)
    said = [line for line in res.stderr.splitlines() if "No space left on device" in line]
    assert len(said) == 1, res.stderr[-3000:]
    assert f"{prefix}_server_metrics.csv: cannot write: No space left on device (errno 28)" in said[0]
    assert "the run goes on" in said[0] and "Traceback" not in res.stderr, res.stderr[-3000:]
    assert res.returncode == 0, res.stderr[-3000:]
    assert "reading server metrics from" in res.stderr  # the scraper ran: it is its write that failed
    assert len(load_rows(prefix)) > 0
    for suffix in ("_llm_stats.csv", "_llm_history.csv", "_run.json"):
        assert os.path.getsize(f"{prefix}{suffix}") > 0, suffix
    assert "LLM summary" in res.stdout
