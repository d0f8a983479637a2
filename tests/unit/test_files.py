"""The run's file contract in one module: names, columns and named row access (nobody else spells
them), and whole files written atomically (issue 19, row 22)."""

from __future__ import annotations

import ast
import os
import threading

from llmload import files
from llmload.metrics.record import CSV_COLUMNS, RequestMeta, failed_record
from llmload.report.document import write_files
from tests.support.processes import ROOT

SUFFIXES = (files.REQUESTS, files.LLM_STATS, files.HISTORY, files.SERVER_METRICS, files.MANIFEST)
# the plugin's writers, which move to llmload.files with the plugin's RunFiles (another branch)


def test_named_cells_are_the_columns_positions():
    assert files.COL._fields == files.REQUESTS_COLUMNS == CSV_COLUMNS
    assert [getattr(files.COL, c) for c in files.REQUESTS_COLUMNS] == list(range(len(files.REQUESTS_COLUMNS)))
    meta = RequestMeta(request_id="r1", start_time=12.5, scenario="chat", users=7)
    row = failed_record(meta, "timeout", "no first token").row()
    assert (row[files.COL.request_id], row[files.COL.users], row[files.COL.status]) == ("r1", 7, "timeout")


def test_paths_and_prefixes():
    assert files.path("runs/chat", files.REQUESTS) == "runs/chat_requests.csv"
    assert files.worker_path("runs/chat", 3) == "runs/chat_requests.worker3.csv"
    for name in ("runs/chat_requests.csv", "runs/chat_requests.worker3.csv", "runs/chat"):
        assert files.prefix_of(name) == "runs/chat"
    assert files.prefix_of("runs_requests.d/chat") == "runs_requests.d/chat"  # a folder's name is no suffix


def _literals(path: str) -> list[tuple[int, str]]:
    """Every string constant of a module that is not a docstring (f-string parts included)."""
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr) and isinstance(node.body[0].value, ast.Constant)}
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docstrings]


def test_no_module_but_files_spells_a_file_name():
    package = os.path.join(ROOT, "llmload")
    found = []
    for base, _dirs, names in os.walk(package):
        for name in names:
            rel = os.path.relpath(os.path.join(base, name), package).replace(os.sep, "/")
            if name.endswith(".py") and rel != "files.py":
                found += [f"llmload/{rel}:{line}: {text!r}" for line, text in _literals(os.path.join(base, name))
                          if (any(s in text for s in SUFFIXES) or "_requests.worker" in text)
                          and "PREFIX_" not in text]  # a help text naming the file to a user
    assert not found, "file names spelled outside llmload/files.py:\n" + "\n".join(found)


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


def test_a_worker_never_writes_where_the_master_says():
    assert files.worker_own_prefix("mine/run", "/etc/cron.d/x") == "mine/run"
    assert files.worker_own_prefix(None, "/etc/cron.d/x") == "x"
    assert files.worker_own_prefix(None, "../../up/runs/chat") == "chat"
    assert files.worker_own_prefix(None, "..") is None and files.worker_own_prefix(None, None) is None
