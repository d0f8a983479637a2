"""The `llmload` command line: compare as the README writes it (no price, no GPU count), --version."""

from __future__ import annotations

import json

from llmload.cli import main
from tests.support.report_rows import req, write_csv


def _run(path, ttft):
    rows = [req(1000 + i * 0.5, 4, ttft=ttft) for i in range(40)]
    rows += [req(1020 + i * 0.25, 8, ttft=ttft * 2, tpot=20.0, e2e=2000.0) for i in range(80)]
    return write_csv(path, rows)


def test_compare_without_prices_or_gpu_counts(tmp_path, capsys):
    a = _run(tmp_path / "chat_requests.csv", 100.0)
    b = _run(tmp_path / "rag_requests.csv", 300.0)
    code = main(["compare", a, b, "--label", "chat", "--label", "rag", "--slo", "ttft_p95_ms=1000",
                 "--warmup-s", "2", "--out", str(tmp_path / "cmp")])
    assert code == 0, capsys.readouterr().err
    data = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert [r["label"] for r in data["runs"]] == ["chat", "rag"]


def test_compare_with_per_run_prices(tmp_path, capsys):
    a = _run(tmp_path / "chat_requests.csv", 100.0)
    b = _run(tmp_path / "rag_requests.csv", 300.0)
    code = main(["compare", a, b, "--slo", "ttft_p95_ms=1000", "--warmup-s", "2", "--gpu-hourly-usd", "2.5,3",
                 "--gpus-per-replica", "1,2", "--out", str(tmp_path / "cmp")])
    assert code == 0, capsys.readouterr().err


def test_version(capsys):
    import pytest

    from llmload import __version__

    with pytest.raises(SystemExit) as e:
        main(["--version"])
    assert e.value.code == 0
    assert capsys.readouterr().out.strip() == f"llmload {__version__}"


def test_report_on_a_folder_suggests_the_prefix_found_there(tmp_path, capsys):
    from tests.support.report_rows import req, write_csv

    folder = tmp_path / "demo"
    folder.mkdir()
    write_csv(folder / "run_requests.csv", [req(1000 + i, 4) for i in range(10)])
    assert main(["report", str(folder)]) == 2
    err = capsys.readouterr().err
    assert f"e.g. {folder / 'run'}," in err, err


def test_report_archives_by_default_and_not_with_no_archive(tmp_path, monkeypatch, capsys):
    from llmload.report.compare.archive import Archive

    db = tmp_path / "runs.sqlite"
    monkeypatch.setenv("LLMLOAD_ARCHIVE", str(db))  # the default archive, never the user's home
    prefix = _run(tmp_path / "chat_requests.csv", 100.0)
    assert main(["report", prefix, "--warmup-s", "2", "--out", str(tmp_path / "r1")]) == 0
    assert f"in {db}" in capsys.readouterr().out
    assert main(["report", prefix, "--warmup-s", "2", "--out", str(tmp_path / "r2"), "--no-archive"]) == 0
    assert "archived" not in capsys.readouterr().out
    with Archive.open(str(db)) as a:
        assert [r["source"] for r in a.runs()] == ["report"]


def test_an_archive_that_cannot_be_opened_fails_only_when_named(tmp_path, monkeypatch, capsys):
    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    bad = str(blocker / "runs.sqlite")  # its folder is a file: it cannot be made
    prefix = _run(tmp_path / "chat_requests.csv", 100.0)
    assert main(["report", prefix, "--warmup-s", "2", "--out", str(tmp_path / "r1"), "--archive", bad]) == 2
    assert f"archive {bad}" in capsys.readouterr().err
    monkeypatch.setenv("LLMLOAD_ARCHIVE", bad)
    assert main(["report", prefix, "--warmup-s", "2", "--out", str(tmp_path / "r2")]) == 0
    assert "warning: not archived" in capsys.readouterr().err
    assert (tmp_path / "r2" / "report.json").exists()


def test_the_first_archive_write_says_where_and_how_to_turn_it_off(tmp_path, monkeypatch, capsys):
    """Issue 32, item 20: `llmload report` created ~/.local/share/llmload/runs.sqlite without a word."""
    home = tmp_path / "home"
    monkeypatch.setenv("HOME", str(home))  # the default path itself, under a home of the test's own
    monkeypatch.delenv("LLMLOAD_ARCHIVE", raising=False)
    db = home / ".local" / "share" / "llmload" / "runs.sqlite"
    prefix = _run(tmp_path / "chat_requests.csv", 100.0)
    assert main(["report", prefix, "--warmup-s", "2", "--out", str(tmp_path / "r1")]) == 0
    first = [line for line in capsys.readouterr().out.splitlines() if line.startswith(("llmload", "archived"))]
    assert first[0] == (f"llmload report: started the run archive {db} (every report and sweep cell is added; "
                        "`llmload history` lists them); --no-archive or LLMLOAD_ARCHIVE=off turns it off")
    assert db.exists() and first[1].startswith("archived as run 1 in ")
    assert main(["report", prefix, "--warmup-s", "2", "--out", str(tmp_path / "r2")]) == 0
    again = capsys.readouterr().out
    assert "started the run archive" not in again and "archived as run 2" in again  # once: at the file's creation
    monkeypatch.setenv("LLMLOAD_ARCHIVE", "off")
    assert main(["report", prefix, "--warmup-s", "2", "--out", str(tmp_path / "r3")]) == 0
    assert "archived" not in capsys.readouterr().out
    assert main(["history"]) == 2
    assert "turned off (LLMLOAD_ARCHIVE=off)" in capsys.readouterr().err
