"""The files a run writes: PREFIX_requests.csv (appended as rows arrive) and PREFIX_llm_stats.csv.

A process starts each file afresh the first time it opens it (``fresh=True``), as Locust does
with its own CSVs: a second run with the same ``--csv`` prefix never appends to the first one's
rows. Later tests of the same process (the web UI's start, stop, start) append; their rows
carry their own ``run_id``.
"""

from __future__ import annotations

import csv
import os
from collections.abc import Iterable, Sequence
from typing import IO, Any

from llmload.record import CSV_COLUMNS


def _open(path: str, fresh: bool) -> tuple[IO[str], bool]:
    """(the file opened for writing rows, whether it needs a header)."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    new = fresh or not os.path.exists(path) or os.path.getsize(path) == 0
    return open(path, "w" if fresh else "a", newline="", encoding="utf-8"), new  # noqa: SIM115


class RequestsCsv:
    """Writes request rows; the header is written once, when the file is new, empty or fresh.

    Rows are flushed on every ``write`` call (one per batch from a worker report or a local
    flush interval), so a run killed mid-way keeps everything written so far.
    """

    def __init__(self, path: str, fresh: bool = True) -> None:
        self.path = path
        self._file: IO[str] | None
        self._file, new = _open(path, fresh)
        self._csv = csv.writer(self._file)
        self.rows_written = 0
        if new:
            self._csv.writerow(CSV_COLUMNS)
            self._file.flush()

    def write(self, rows: Iterable[Sequence[Any]]) -> None:
        if self._file is None:
            raise RuntimeError(f"{self.path}: already closed")
        n = 0
        for row in rows:
            self._csv.writerow(row)
            n += 1
        if n:
            self._file.flush()
            self.rows_written += n

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None


def write_llm_stats(path: str, rows: list[dict[str, Any]]) -> None:
    """Write the per-scenario summary (overwrites: it is the final state of the run)."""
    if not rows:
        return
    tmp = path + ".tmp"
    with open(tmp, "w", newline="", encoding="utf-8") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    os.replace(tmp, path)


HISTORY_COLUMNS = (
    "time", "scenario", "users", "in_flight", "window_s", "requests", "ok", "errors", "rps", "output_tps",
    "ttft_p50_ms", "ttft_p95_ms", "ttft_p99_ms", "tpot_p50_ms", "tpot_p95_ms", "tpot_p99_ms", "itl_p50_ms",
    "itl_p95_ms", "itl_p99_ms", "worst_stall_ms", "cache_hit_ratio", "errors_by_status", "client_cpu_max",
    "client_lag_p99_ms_max", "client_limited",
)


class HistoryCsv:
    """PREFIX_llm_history.csv: one row per scenario per interval over the live window."""

    def __init__(self, path: str, fresh: bool = True) -> None:
        self.path = path
        self._file: IO[str] | None
        self._file, new = _open(path, fresh)
        self._csv = csv.writer(self._file)
        if new:
            self._csv.writerow(HISTORY_COLUMNS)

    def write(self, rows: list[dict[str, Any]]) -> None:
        if self._file is None:
            return
        for r in rows:
            errors = ";".join(f"{k}:{v}" for k, v in sorted(r.get("errors_by_status", {}).items()))
            self._csv.writerow([errors if c == "errors_by_status" else r.get(c) for c in HISTORY_COLUMNS])
        self._file.flush()

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None
