"""The files a run writes: PREFIX_requests.csv (appended as rows arrive), a worker's own
PREFIX_requests.workerN.csv, and PREFIX_llm_stats.csv.

A process starts the requests CSV afresh the first time it opens it (``fresh=True``), as Locust
does with its own CSVs: a second run with the same ``--csv`` prefix never appends to the first
one's rows. Later tests of the same process (the web UI's start, stop, start) append to the open
file; their rows carry their own ``run_id``. PREFIX_llm_history.csv is opened afresh at each test.

Usage::

    out = RequestsCsv("runs/chat_requests.csv")
    out.write(rows)          # raises OutputError (disk full, ...); rows written before stay whole
    worker_requests_path("runs/chat", 0)   # "runs/chat_requests.worker0.csv"
"""

from __future__ import annotations

import csv
import io
import os
from collections.abc import Iterable, Sequence
from typing import IO, Any

from llmload.metrics import catalog
from llmload.metrics.record import CSV_COLUMNS


class OutputError(Exception):
    """A file of the run cannot be written; the message names it and why."""


def worker_requests_path(prefix: str, index: int | str) -> str:
    """Where a worker keeps its own rows, on its own disk."""
    return f"{prefix}_requests.worker{index}.csv"


class RequestsCsv:
    """Appends request rows; the header is written once, when the file is new or empty.

    Each ``write`` (one batch: a worker report or a local flush interval) goes to the kernel at
    once, so a run killed mid-way keeps everything written so far. A batch the disk cannot take
    is cut back off the file, so the rows before it stay whole and readable; rows already written
    are never rewritten. ``fresh`` (a new run) empties the file first; without it, rows are appended.
    """

    def __init__(self, path: str, fresh: bool = True) -> None:
        self.path = path
        self.rows_written = 0
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | (os.O_TRUNC if fresh else 0)
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
    tmp = path + ".tmp"
    try:
        with open(tmp, "w", newline="", encoding="utf-8") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
        os.replace(tmp, path)
    except OSError as e:
        try:
            os.remove(tmp)
        except OSError:
            pass
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
