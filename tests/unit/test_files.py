"""The run's file contract in one module: names, columns and named row access; nobody else spells them."""

from __future__ import annotations

import ast
import os

from llmload import files
from llmload.metrics.record import CSV_COLUMNS, RequestMeta, failed_record
from tests.support.processes import ROOT

SUFFIXES = (files.REQUESTS, files.LLM_STATS, files.HISTORY, files.SERVER_METRICS, files.MANIFEST)
# the plugin's writers, which move to llmload.files with the plugin's RunFiles (another branch)
WRITERS_NOT_YET_MOVED = {"plugin/wiring.py", "plugin/live_feed.py", "plugin/run_end.py", "plugin/webui.py",
                         "plugin/run_files.py"}


def test_named_cells_are_the_columns_positions():
    assert files.COL._fields == files.REQUESTS_COLUMNS == CSV_COLUMNS
    assert [getattr(files.COL, c) for c in files.REQUESTS_COLUMNS] == list(range(len(files.REQUESTS_COLUMNS)))
    meta = RequestMeta(request_id="r1", start_time=12.5, scenario="chat", users=7)
    row = failed_record(meta, "timeout", "no first token").row()
    assert (row[files.COL.request_id], row[files.COL.users], row[files.COL.status]) == ("r1", 7, "timeout")
    assert len(set(files.HISTORY_COLUMNS)) == len(files.HISTORY_COLUMNS) and files.HISTORY_COLUMNS[:2] == (
        "time", "scenario")


def test_paths_and_prefixes():
    assert files.path("runs/chat", files.REQUESTS) == "runs/chat_requests.csv"
    assert files.worker_requests("runs/chat", 3) == "runs/chat_requests.worker3.csv"
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
            if name.endswith(".py") and rel != "files.py" and rel not in WRITERS_NOT_YET_MOVED:
                found += [f"llmload/{rel}:{line}: {text!r}" for line, text in _literals(os.path.join(base, name))
                          if (any(s in text for s in SUFFIXES) or "_requests.worker" in text)
                          and "PREFIX_" not in text]  # a help text naming the file to a user
    assert not found, "file names spelled outside llmload/files.py:\n" + "\n".join(found)
