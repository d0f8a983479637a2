"""The run's file contract: names, and whole files written atomically (issue 19, row 22)."""

from __future__ import annotations

import os
import threading

from llmload import files
from llmload.report.document import write_files


def test_names_from_a_prefix_and_back():
    assert files.path("runs/chat", files.REQUESTS) == "runs/chat_requests.csv"
    assert files.prefix_of("runs/chat_requests.worker0.csv") == "runs/chat"
    assert files.prefix_of("runs/chat") == "runs/chat"


def test_atomic_writes_leave_no_temporary_file_and_use_unique_names(tmp_path, monkeypatch):
    seen: list[str] = []
    real_replace = os.replace

    def spy(src, dst):
        seen.append(os.path.basename(src))
        real_replace(src, dst)

    monkeypatch.setattr(os, "replace", spy)
    path = tmp_path / "report.md"
    barrier = threading.Barrier(2)

    def writer(text: str) -> None:
        barrier.wait()
        files.replace_atomically(str(path), text)

    threads = [threading.Thread(target=writer, args=(t,)) for t in ("a" * 100_000, "b" * 100_000)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert path.read_text() in ("a" * 100_000, "b" * 100_000)
    assert len(set(seen)) == 2, seen  # two writers never shared a temporary name
    assert sorted(os.listdir(tmp_path)) == ["report.md"]


def test_the_report_writes_through_it(tmp_path):
    written = write_files(str(tmp_path / "out"), {"report.md": "x", "report.json": "{}"})
    assert sorted(os.path.basename(p) for p in written) == ["report.json", "report.md"]
    assert sorted(os.listdir(tmp_path / "out")) == ["report.json", "report.md"]


def test_a_calibration_must_be_a_small_regular_file(tmp_path, caplog):
    from llmload.health.calibration import MAX_BYTES, load_calibration

    assert load_calibration("/dev/zero") is None
    assert "not a regular file" in caplog.text
    big = tmp_path / "big.json"
    big.write_text(" " * (MAX_BYTES + 1))
    assert load_calibration(str(big)) is None
    assert "larger than a calibration" in caplog.text
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    assert load_calibration(str(fifo)) is None  # returns at once: a FIFO is never opened
