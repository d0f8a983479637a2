"""The files a run writes: PREFIX_requests.csv (appended as rows arrive), a worker's own
PREFIX_requests.workerN.csv, PREFIX_llm_history.csv and PREFIX_llm_stats.csv; names from
:mod:`llmload.files`. :class:`RunFiles` owns them for one process, and the one path taken when
one cannot be written (a full disk): the message names the file and why, the rows written before
stay whole, nothing more is written, and the process's role says what follows (the master or a
local process stops the run with exit code 1; a worker says its own copy stops, the master
still has the rows).

A process starts the requests CSV afresh the first time it opens it (``fresh=True``), as Locust
does with its own CSVs: a second run with the same ``--csv`` prefix never appends to the first
one's rows. Later tests of the same process (the web UI's start, stop, start) append to the open
file; their rows carry their own ``run_id``. PREFIX_llm_history.csv is opened afresh at each test.

Usage::

    run_files = RunFiles(RunIdentity(), on_failure=role.file_failed)
    run_files.start(environment, config, "runs/chat", "local", writes_requests=True)   # at test start
    run_files.write_requests(rows); run_files.write_history(rows)
    run_files.finish(table, time.time())               # at test end
    out = RequestsCsv("runs/chat_requests.csv")
    out.write(rows)          # raises OutputError (disk full, ...); rows written before stay whole
    worker_requests_path("runs/chat", 0)   # "runs/chat_requests.worker0.csv"
"""

from __future__ import annotations

import csv
import io
import logging
import os
import socket
from collections.abc import Callable, Iterable, Sequence
from typing import IO, Any

from llmload import files
from llmload.metrics import catalog
from llmload.metrics.record import CSV_COLUMNS
from llmload.net.turns import off_the_loop
from llmload.plugin.output.run_manifest import RunIdentity

log = logging.getLogger("llmload")


class OutputError(Exception):
    """A file of the run cannot be written; the message names it and why."""


def worker_requests_path(prefix: str, index: int | str) -> str:
    """Where a worker keeps its own rows, on its own disk."""
    return files.worker_path(prefix, index)


class RequestsCsv:
    """Appends request rows; the header is written once, when the file is new or empty.

    Each ``write`` (one batch: a worker report or a local flush interval) goes to the kernel at
    once, so a run killed mid-way keeps everything written so far. A batch the disk cannot take
    is cut back off the file, so the rows before it stay whole and readable; rows already written
    are never rewritten. ``fresh`` (a new run) empties the file first; without it, rows are appended.
    """

    def __init__(self, path: str, fresh: bool = True, follow: bool = True) -> None:
        self.path = path
        self.rows_written = 0
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | (os.O_TRUNC if fresh else 0)
            if not follow:  # a path the master named: never through a symbolic link planted there
                flags |= os.O_NOFOLLOW
            self._fd: int | None = os.open(path, flags, 0o644)
        except OSError as e:
            raise OutputError(f"{path}: cannot open for writing: {e.strerror}") from None
        self._size = os.fstat(self._fd).st_size
        if self._size == 0:
            self._append(_csv_text([CSV_COLUMNS]))  # a full disk: OutputError already here

    def write(self, rows: Iterable[Sequence[Any]]) -> None:
        if self._fd is None:
            raise OutputError(f"{self.path}: already closed")
        rows = list(rows)
        if rows:
            self._append(_csv_text(rows))
            self.rows_written += len(rows)

    def _append(self, data: bytes) -> None:
        before = self._size
        view = memoryview(data)
        try:
            while view:
                n = os.write(self._fd, view)
                view = view[n:]
                self._size += n
        except OSError as e:
            try:
                os.ftruncate(self._fd, before)  # only this batch's part: earlier rows stay as they were
                self._size = before
            except OSError:
                pass
            raise OutputError(f"{self.path}: cannot write: {e.strerror} (errno {e.errno}); the "
                              f"{self.rows_written} rows written before stay readable") from None

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def _csv_text(rows: Iterable[Sequence[Any]]) -> bytes:
    buf = io.StringIO()
    csv.writer(buf).writerows(rows)
    return buf.getvalue().encode("utf-8")


def write_llm_stats(path: str, rows: list[dict[str, Any]]) -> None:
    """Write the per-scenario summary (overwrites: it is the final state of the run)."""
    if not rows:
        return
    buf = io.StringIO()
    # every row's columns in first-seen order: the per-model rows add ``model`` (models: mixes)
    w = csv.DictWriter(buf, fieldnames=list(dict.fromkeys(k for r in rows for k in r)), restval="")
    w.writeheader()
    w.writerows(rows)
    try:
        off_the_loop(files.replace_atomically, path, buf.getvalue())  # its fsync must not hold the loop
    except OSError as e:
        raise OutputError(f"{path}: cannot write: {e.strerror} (errno {e.errno})") from None


HISTORY_COLUMNS = (
    "time", "scenario", "users", "in_flight", "window_s", "requests", "ok", "errors", "rps", "output_tps",
    *catalog.live_keys(), "cache_hit_ratio", "errors_by_status", "client_cpu_max",
    "client_lag_p99_ms_max", "client_limited", "backoff_s", "errors_dominate", "client_cause", "client_stalls",
    "client_stall_max_ms", "client_stall_cpu_max_ms", "client_steal_pct_max", "client_others_cpu_max",
    "client_run_queue_max", *catalog.RENAMED,  # the old names last, for one release (deprecated)
)


class HistoryCsv:
    """PREFIX_llm_history.csv: one row per scenario per interval over the live window."""

    def __init__(self, path: str, fresh: bool = True) -> None:
        self.path = path
        new = fresh or not os.path.exists(path) or os.path.getsize(path) == 0
        self._file: IO[str] | None = open(path, "w" if fresh else "a", newline="", encoding="utf-8")  # noqa: SIM115
        self._csv = csv.writer(self._file)
        if new:
            self._csv.writerow(HISTORY_COLUMNS)

    def write(self, rows: list[dict[str, Any]]) -> None:
        if self._file is None:
            return
        try:
            for r in rows:
                errors = ";".join(f"{k}:{v}" for k, v in sorted(r.get("errors_by_status", {}).items()))
                self._csv.writerow([errors if c == "errors_by_status" else r.get(c) for c in HISTORY_COLUMNS])
            self._file.flush()
        except OSError as e:
            self.close()
            raise OutputError(f"{self.path}: cannot write: {e.strerror} (errno {e.errno})") from None

    def close(self) -> None:
        if self._file is not None:
            f, self._file = self._file, None
            try:
                f.close()
            except OSError:
                pass  # a full disk: what did not fit is reported by write


class RunFiles:
    """Every file one process writes for a run (see the module docstring)."""

    def __init__(self, run: RunIdentity, on_failure: Callable[[Exception], None]) -> None:
        self.run = run
        """The run's id and PREFIX_run.json (made by the process that writes the CSV)."""
        self.prefix: str | None = None
        """This process's own ``--csv``."""
        self.master_prefix: str | None = None
        """A worker's fallback: the master's ``--csv`` (the master passes it on)."""
        self.master_dir: str | None = None
        """And that prefix's directory, absolute, with its (device, inode) as the master sees it."""
        self.master_dir_id: tuple[int, int] | None = None
        self.requests: RequestsCsv | None = None
        """PREFIX_requests.csv (master, local) or a worker's own PREFIX_requests.workerN.csv."""
        self.history: HistoryCsv | None = None
        self.error = ""
        """The first file that could not be written, and why ('' while every file is fine)."""
        self._on_failure = on_failure

    def start(self, environment: Any, config: Any, prefix: str | None, role: str, writes_requests: bool) -> None:
        """At a test start: the prefix, PREFIX_requests.csv opened (kept open across tests), a new
        run id and PREFIX_run.json (not on a worker: its master's id arrives)."""
        self.prefix = prefix or None
        if self.prefix and writes_requests and self.run.run_id:
            self.keep_earlier_test(self.prefix, self.run.run_id)
        if self.prefix and writes_requests and self.requests is None and not self.error:
            try:
                self.requests = RequestsCsv(files.path(self.prefix, files.REQUESTS))
            except OutputError as e:
                self.failed(e)
        self.run.start(environment, config, prefix, role)

    @staticmethod
    def keep_earlier_test(prefix: str, run_id: str) -> None:
        """A second test in one web-UI session: the first one's manifest, history and stats move to
        names with its run id (``PREFIX_run.<id>.json``), where ``llmload report --run-id`` finds them;
        the requests CSV holds every test's rows already."""
        for suffix in (files.MANIFEST, files.HISTORY, files.LLM_STATS):
            current = files.path(prefix, suffix)
            try:
                os.replace(current, files.of_run(current, run_id))
            except FileNotFoundError:
                continue
            except OSError as e:
                log.error("llmload: cannot keep %s of the earlier test as %s: %s", current, files.of_run(current,
                          run_id), e)

    def finish(self, table: list[dict[str, Any]], end: float) -> None:
        """At the end of a test: PREFIX_llm_stats.csv, the history file closed, PREFIX_run.json's end."""
        self.write_llm_stats(table)
        self.close_history()
        self.run.finish(end)

    def failed(self, error: Exception) -> None:
        """The one path when a file cannot be written: said once, nothing more written."""
        if self.error:
            return
        self.error = str(error)
        self.close()
        self._on_failure(error)

    def write_requests(self, rows: list) -> None:
        if self.requests is not None and rows:
            try:
                self.requests.write(rows)
            except OutputError as e:
                self.failed(e)

    def take_master_csv(self, data: dict[str, Any]) -> None:
        """A worker: the master's --csv and its directory (its PROCESSES message)."""
        self.master_prefix = data.get("csv") or None
        self.master_dir = data.get("csv_dir") or None
        self.master_dir_id = tuple(data["csv_dir_id"]) if data.get("csv_dir_id") else None

    def _copy_prefix(self) -> tuple[str | None, str]:
        return files.worker_copy_prefix(self.prefix, self.master_prefix, self.master_dir, self.master_dir_id)

    @property
    def keeps_worker_rows(self) -> bool:
        """A worker has a file for its own copy: a prefix (its own or the master's), no failure."""
        return bool(self._copy_prefix()[0]) and not self.error

    def worker_path(self, index: int) -> str | None:
        prefix = self._copy_prefix()[0]
        return files.worker_path(prefix, index) if prefix else None

    def copy_info(self, index: int) -> dict[str, Any] | None:
        """Where this worker keeps its copy, for the master's summary: the absolute path, this host,
        and why there (:func:`llmload.files.worker_copy_prefix`); None without one."""
        prefix, how = self._copy_prefix()
        if not prefix or self.error:
            return None
        return {"path": os.path.abspath(files.worker_path(prefix, index)), "host": socket.gethostname(), "how": how}

    def write_worker_rows(self, rows: list, index: int) -> None:
        """A worker's own copy of the rows it ships (opened at the first rows: the master's prefix
        may arrive after the test start)."""
        path = self.worker_path(index)
        if not rows or self.error or path is None:
            return
        try:
            if self.requests is None:
                self.requests = RequestsCsv(path, follow=self._copy_prefix()[1] == files.OWN)
                log.info("llmload: this worker keeps its own copy of its rows in %s", os.path.abspath(path))
            self.requests.write(rows)
        except (OutputError, OSError) as e:
            self.failed(e)

    def write_history(self, rows: list[dict[str, Any]]) -> None:
        if not self.prefix or not rows or self.error:
            return
        try:
            if self.history is None:
                self.history = HistoryCsv(files.path(self.prefix, files.HISTORY))
            self.history.write(rows)
        except (OutputError, OSError) as e:
            self.history = None
            self.failed(e)

    def close_history(self) -> None:
        """At the end of a test: the next one starts its own history file."""
        if self.history is not None:
            self.history.close()
            self.history = None

    def write_llm_stats(self, table: list[dict[str, Any]]) -> None:
        if self.prefix and table and not self.error:
            try:
                write_llm_stats(files.path(self.prefix, files.LLM_STATS), table)
            except OutputError as e:
                self.failed(e)

    def close(self) -> None:
        if self.requests is not None:
            self.requests.close()
            self.requests = None
        self.close_history()
