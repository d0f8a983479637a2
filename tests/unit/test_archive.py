"""The run archive: a v1 file is upgraded to v2 with its runs kept; runs go in and come out."""

from __future__ import annotations

import sqlite3

import pytest

from llmload.report.compare import archive as arch
from llmload.report.compare.archive import SCHEMA_VERSION, Archive, ArchiveError, default_path, history_text


def _v1(path) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    db.executescript("BEGIN;" + arch._V1 + "COMMIT;")
    db.execute("INSERT INTO runs (run_id, added_at, source, prefix, host, model, capacity) VALUES "
               "('r-old', '2026-10-01T00:00:00+00:00', 'report', '/runs/old', 'http://127.0.0.1:8000', 'm', "
               "'{\"level\": 16}')")
    db.close()


def test_a_version_1_archive_is_upgraded_and_keeps_its_runs(tmp_path):
    path = tmp_path / "runs.sqlite"
    _v1(path)
    with Archive.open(str(path)) as a:
        assert arch._version(a.db) == SCHEMA_VERSION == 2
        cols = {r[1] for r in a.db.execute("PRAGMA table_info(runs)")}
        assert {"engine", "engine_version", "cost", "plan", "sweep", "cell"} <= cols
        old = a.get("r-old")
        assert old["prefix"] == "/runs/old" and old["cost"] is None
        assert "r-old" in history_text(a.runs(model="m"))
    with Archive.open(str(path)) as a:  # opening again changes nothing
        assert len(a.runs()) == 1


def test_a_newer_archive_is_refused(tmp_path):
    path = tmp_path / "runs.sqlite"
    _v1(path)
    db = sqlite3.connect(path)
    db.execute("UPDATE meta SET value = '99'")
    db.commit()
    db.close()
    with pytest.raises(ArchiveError, match="newer than this llmload"):
        Archive.open(str(path))


def test_last_skips_the_runs_being_compared_and_filters_apply(tmp_path):
    with Archive.open(str(tmp_path / "a.sqlite")) as a:
        for rid, model, day in (("r1", "llama", "2026-11-01"), ("r2", "qwen", "2026-11-20")):
            a.db.execute("INSERT INTO runs (run_id, added_at, source, prefix, model) VALUES (?, ?, 'report', ?, ?)",
                         (rid, f"{day}T00:00:00+00:00", f"/runs/{rid}", model))
        assert a.get("last")["run_id"] == "r2"
        assert a.get("last", {"r2"})["run_id"] == "r1"
        assert [r["run_id"] for r in a.runs(since="2026-11-10")] == ["r2"]
        assert [r["run_id"] for r in a.runs(model="lla")] == ["r1"]
        with pytest.raises(ArchiveError, match="no run 'nope'"):
            a.get("nope")


def test_the_default_path_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv("LLMLOAD_ARCHIVE", str(tmp_path / "x.sqlite"))
    assert default_path() == str(tmp_path / "x.sqlite")
    monkeypatch.delenv("LLMLOAD_ARCHIVE")
    assert default_path().endswith("/.local/share/llmload/runs.sqlite")
    monkeypatch.setenv("LLMLOAD_ARCHIVE", "off")
    assert default_path() is None
