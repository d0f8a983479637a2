"""The run's file contract in one module: names, columns and named row access (nobody else spells
them), and whole files written atomically (issue 19, row 22)."""

from __future__ import annotations

import ast
import json
import os
import threading
import time

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


def test_a_worker_keeps_its_copy_beside_the_masters_files_or_under_the_same_relative_path(tmp_path, monkeypatch):
    """Issue 32, item 19: the master's --csv some/dir/big put workers' copies in their working directories."""
    monkeypatch.chdir(tmp_path)
    master_dir = tmp_path / "master" / "some" / "dir"
    master_dir.mkdir(parents=True)
    same = files.directory_id(str(master_dir))
    assert files.worker_copy_prefix("mine/run", "some/dir/big", str(master_dir), same) == ("mine/run", files.OWN)
    assert files.worker_copy_prefix(None, "some/dir/big", str(master_dir), same) == \
        (str(master_dir / "big"), files.BESIDE)  # the very directory the master writes in: beside its files
    elsewhere = (same[0], same[1] + 1)  # another host's directory of that name (or another one here)
    assert files.worker_copy_prefix(None, "some/dir/big", str(master_dir), elsewhere) == \
        ("some/dir/big", files.RELATIVE)  # under this worker's working directory
    assert files.worker_copy_prefix(None, "some/dir/big", "/no/such/dir", [1, 2]) == ("some/dir/big", files.RELATIVE)
    # never a path the master names outside this worker's working directory, unless it is the master's own
    assert files.worker_copy_prefix(None, "/etc/cron.d/x", "/etc/cron.d", [1, 2]) == ("x", files.IN_CWD)
    assert files.worker_copy_prefix(None, "../../up/runs/chat", None, None) == ("chat", files.IN_CWD)
    assert files.worker_copy_prefix(None, "..", None, None) == (None, "")
    assert files.worker_copy_prefix(None, None, None, None) == (None, "")


def test_every_whole_file_gets_the_umasks_mode_as_locusts_csvs_do(tmp_path):
    """Issue 32, item 3: report.*, compare.*, sweep.*, calibrate's files, PREFIX_run.json and
    PREFIX_llm_stats.csv were 0600 (mkstemp's mode); a team on a shared machine could not read them."""
    from llmload.health.calibration import VERSION, save_calibration
    from llmload.plugin.output.run_files import write_llm_stats
    from llmload.plugin.output.run_manifest import write_manifest

    old = os.umask(0o022)
    try:
        for mask in (0o022, 0o027, 0o077):
            os.umask(mask)
            d = tmp_path / f"m{mask:o}"
            with open(d.mkdir() or d / "locust_stats.csv", "w") as f:  # what Locust's own CSVs get
                f.write("x")
            written = [
                *write_files(str(d), {"report.md": "x", "compare.json": "{}", "sweep.html": "<p>"}),
                str(d / "cal.json"), str(d / "run_run.json"), str(d / "run_llm_stats.csv"), str(d / "whole.txt")]
            save_calibration({"version": VERSION, "host": "h", "per_process": {"max_tps": 1.0, "max_streams": 1,
                                                                       "limit_found": True}, "curve": []},
                             str(d / "cal.json"))
            write_manifest(str(d / "run_run.json"), {"run_id": "r"})
            write_llm_stats(str(d / "run_llm_stats.csv"), [{"scenario": "chat", "requests": 1}])
            files.replace_atomically(str(d / "whole.txt"), "y")
            want = os.stat(d / "locust_stats.csv").st_mode & 0o777
            assert want == 0o666 & ~mask
            assert {p: os.stat(p).st_mode & 0o777 for p in written} == dict.fromkeys(written, want)
    finally:
        os.umask(old)


def test_a_slow_fsync_of_the_manifest_does_not_hold_the_event_loop(tmp_path, monkeypatch):
    """PREFIX_run.json is written in a Locust process while users start: its fsync (2.1 s once on a
    busy disk) runs off the loop, so a greenlet ticking every 10 ms keeps ticking."""
    import gevent
    from gevent import monkey

    from llmload.plugin.output.run_manifest import write_manifest

    blocking_sleep = monkey.get_original("time", "sleep")
    monkeypatch.setattr(os, "fsync", lambda fd: blocking_sleep(0.4))  # blocks in the kernel, as a slow disk
    ticks: list[float] = []

    def tick() -> None:
        while True:
            ticks.append(time.perf_counter())
            gevent.sleep(0.01)

    ticker = gevent.spawn(tick)
    gevent.sleep(0.05)
    write_manifest(str(tmp_path / "x_run.json"), {"run_id": "r"})
    ticker.kill()
    gaps = [b - a for a, b in zip(ticks, ticks[1:])]  # noqa: B905 - offset by one on purpose
    assert json.loads((tmp_path / "x_run.json").read_text()) == {"run_id": "r"}
    assert max(gaps) < 0.2, max(gaps)  # in the loop, one gap would be the whole 0.4 s
