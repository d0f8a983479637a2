"""Reading PREFIX_requests.csv: what is there, and a warning for everything that is not."""

from __future__ import annotations

import os
import re
import warnings as pywarnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np
import pandas as pd

from llmload import files
from llmload.files import REQUESTS_COLUMNS as CSV_COLUMNS
from llmload.metrics import catalog
from llmload.metrics.record import STATUSES


class ReportError(Exception):
    """Input the report cannot be made from; the message says what and where."""


REQUIRED = ("start_time", "status", "users")
HEAD_BYTES = 1 << 16
_SKIPPED = re.compile(r"Skipping line (\d+)")
NUMERIC = ("start_time", "http_status", *(m.row_column for m in catalog.ROW_METRICS), "prompt_tokens",
           "cached_tokens", "completion_tokens", "max_tokens", "users", "worker", "turn",
           "scheduled_time", "requested_input_tokens", "arrival_rate", "coalesced_reads", "requested_image_tokens",
           "backoff_ms")
TEXT = ("request_id", "scenario", "status", "token_source", "finish_reason", "session_id", "error", "step_kind",
        "run_id", "call_id", "call_after", "trace_id", "phase")


@dataclass
class Loaded:
    path: str
    df: pd.DataFrame
    warnings: list[str] = field(default_factory=list)
    level: str = "users"  # what the load steps are: "users", or "arrival_rate" for open-loop runs
    run_id: str | None = None  # the run the rows are of (None: rows written before runs had ids)
    warmup_rows: int = 0  # rows of the run's --warmup-seconds warm-up (phase=warmup), left out of df


def requests_path(prefix: str) -> str:
    if prefix.endswith(".csv"):  # a file: PREFIX_requests.csv, a worker's PREFIX_requests.workerN.csv, ...
        return prefix
    return files.path(prefix, files.REQUESTS)


def select_run(df: pd.DataFrame, path: str, run_id: str | None,
               warnings: list[str]) -> tuple[pd.DataFrame, str | None]:
    """The rows of one run: the only one there, or ``run_id``. Rows of several runs without a
    choice are refused: a report that mixed them would be wrong without saying so."""
    if "run_id" not in df.columns:
        if run_id:
            raise ReportError(f"{path}: no run_id column (written before runs had ids): it holds one run; "
                              "drop --run-id")
        return df, None
    ids = df["run_id"].fillna("")
    named = ids[ids != ""].unique()
    if len(named) == 1 and (ids == "").any():
        # Rows without an id next to one run: a worker's first rows, shipped before its master told
        # it the run id (a late joiner). They are that run's; say so.
        warnings.append(f"{path}: {int((ids == '').sum())} row(s) without a run_id were read as run {named[0]}'s "
                        "(a worker's rows from before its master told it the run id)")
        ids = ids.where(ids != "", named[0])
        df = df.assign(run_id=ids.to_numpy())
    counts = ids.value_counts(sort=False)
    if run_id:
        if run_id not in counts.index:
            raise ReportError(f"{path}: no rows of run {run_id!r}; it has {_runs_text(df, ids)}")
        return df[(ids == run_id).to_numpy()].reset_index(drop=True), run_id
    if len(counts) > 1:
        raise ReportError(f"{path}: rows of {len(counts)} runs ({_runs_text(df, ids)}); pick one with "
                          "--run-id ID")
    only = str(counts.index[0]) if len(counts) else ""
    return df, only or None


def _runs_text(df: pd.DataFrame, ids: pd.Series) -> str:
    first = df.groupby(ids.to_numpy(), sort=False)["start_time"].agg(["min", "size"]).sort_values("min")
    return ", ".join(f"{rid or '(no run_id)'}: {int(n):,} rows from {pd.Timestamp(t, unit='s'):%Y-%m-%d %H:%M:%S}"
                     for rid, (t, n) in first.iterrows())


def load_requests(prefix: str | Sequence[str], run_id: str | None = None) -> Loaded:
    """Load the rows of one run: a prefix or a file, or several files (a master's and its
    workers' ``PREFIX_requests.workerN.csv``, e.g. after the master was lost), a request found in
    several counted once; with ``run_id``, that run's rows (:func:`select_run`). Raise
    ReportError when nothing usable is there."""
    sources = [prefix] if isinstance(prefix, str) else list(prefix)
    if not sources:
        raise ReportError("no requests CSV given")
    warnings: list[str] = []
    frames = [_read_one(requests_path(p), warnings) for p in sources]
    path = ", ".join(requests_path(p) for p in sources)
    df = frames[0] if len(frames) == 1 else pd.concat(frames, ignore_index=True)
    if len(frames) > 1 and "request_id" in df.columns:
        dup = df["request_id"].notna() & df["request_id"].duplicated()
        if dup.any():
            warnings.append(f"{int(dup.sum())} request(s) found in more than one file were counted once")
            df = df[~dup.to_numpy()].reset_index(drop=True)
    return _finish(path, df, warnings, run_id)


class _Head:
    """The first ``limit`` bytes of a binary file, for a parser that reads until EOF."""

    def __init__(self, f: BinaryIO, limit: int) -> None:
        self._f, self._left = f, limit

    def read(self, n: int = -1) -> bytes:
        if self._left <= 0:
            return b""
        data = self._f.read(self._left if n is None or n < 0 else min(n, self._left))
        self._left -= len(data)
        return data

    def __iter__(self):  # pandas checks that a handle is iterable
        return iter(self.read().splitlines(keepends=True))


def _last_newline(path: str, size: int) -> int:
    """The offset of the file's last newline (-1: none), reading backwards in blocks."""
    with open(path, "rb") as f:
        end = size
        while end > 0:
            start = max(0, end - HEAD_BYTES)
            f.seek(start)
            block = f.read(end - start)
            i = block.rfind(b"\n")
            if i >= 0:
                return start + i
            end = start
    return -1


def _prefix_hint(path: str) -> str:
    """A prefix that exists where the user pointed (``reports/demo`` holds ``run_requests.csv``:
    ``reports/demo/run``), else the usual example."""
    base = path.removesuffix(files.REQUESTS)
    folder = base if os.path.isdir(base) else os.path.dirname(base) or "."
    try:
        found = sorted(f for f in os.listdir(folder) if f.endswith(files.REQUESTS))
    except OSError:
        found = []
    return os.path.join(folder, found[0].removesuffix(files.REQUESTS)) if found else "runs/chat"


def _read_one(path: str, warnings: list[str]) -> pd.DataFrame:
    if not os.path.exists(path):
        raise ReportError(f"{path}: no such file (pass the --csv PREFIX of a run, e.g. "
                          f"{_prefix_hint(path)}, or its PREFIX_requests*.csv files)")
    size = os.path.getsize(path)
    with open(path, "rb") as f:  # the head and the last byte only: the file is parsed as a stream below
        head = f.read(HEAD_BYTES)
        f.seek(max(0, size - 1))
        last = f.read(1)
    if not head.strip():
        raise ReportError(f"{path}: the file is empty (did the run write any request?)")
    if b"\0" in head:
        raise ReportError(f"{path}: not a CSV file (binary data); expected the header {','.join(CSV_COLUMNS)}")
    limit = size
    if last != b"\n":
        # A run killed mid-write leaves a partial last line: drop it, keep the rest.
        cut = _last_newline(path, size)
        if cut < 0:
            raise ReportError(f"{path}: only a partial header line")
        warnings.append(f"{path}: the last line was cut off (a run killed mid-write?); it was skipped")
        limit = cut + 1
    header = [c.strip() for c in head.split(b"\n", 1)[0].decode("utf-8", "replace").strip().split(",")]
    missing = [c for c in REQUIRED if c not in header]
    if missing:
        raise ReportError(f"{path}: missing column(s) {', '.join(missing)}; expected the header "
                          f"{','.join(CSV_COLUMNS)}")
    doubled = sorted({c for c in header if c and header.count(c) > 1})
    if doubled:
        raise ReportError(f"{path}: column(s) {', '.join(doubled)} appear more than once in the header")
    absent = [c for c in CSV_COLUMNS if c not in header and c != "run_id"]  # no run_id: one run
    if absent:
        warnings.append(f"{path}: no column(s) {', '.join(absent)}; what needs them is left out")
    usecols = [c for c in header if c in CSV_COLUMNS]
    dtypes = {c: "float64" for c in NUMERIC if c in usecols}
    dtypes.update({c: "string" for c in TEXT if c in usecols and c not in ("scenario", "status")})
    dtypes.update({c: "category" for c in ("scenario", "status") if c in usecols})
    try:
        with open(path, "rb") as f, pywarnings.catch_warnings(record=True) as caught:
            pywarnings.simplefilter("always", pd.errors.ParserWarning)
            # Every column is parsed (no usecols): with usecols pandas ignores a line's extra fields, and
            # a line with more fields than the header has its values shifted, so it must be seen and skipped.
            df = pd.read_csv(_Head(f, limit) if limit < size else f,
                             dtype={k: v for k, v in dtypes.items() if v != "float64"},
                             keep_default_na=False, na_values=[""], engine="c", on_bad_lines="warn")
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as e:
        raise ReportError(f"{path}: cannot parse: {e}") from None
    if len(usecols) < len(df.columns):
        df = df[usecols]
    skipped = [int(m) for w in caught for m in _SKIPPED.findall(str(w.message))]
    if skipped:
        warnings.append(f"{path}: {len(skipped)} line(s) with more fields than the header were skipped (first: "
                        f"line {min(skipped)}); was the file written by another tool or version?")
    for c in NUMERIC:
        if c in df.columns and not pd.api.types.is_numeric_dtype(df[c]):
            before = df[c].notna().sum()
            df[c] = pd.to_numeric(df[c], errors="coerce")
            lost = int(before - df[c].notna().sum())
            if lost:
                warnings.append(f"{path}: column {c}: {lost} value(s) that are not numbers were ignored")
    return df


def _finish(path: str, df: pd.DataFrame, warnings: list[str], run_id: str | None) -> Loaded:
    if "scenario" not in df.columns:
        df["scenario"] = pd.Categorical(["default"] * len(df))
    df["scenario"] = df["scenario"].astype("string").fillna("default").astype("category")
    valid = df["status"].astype("string").isin(STATUSES) & df["start_time"].notna() & df["users"].notna()
    invalid = int((~valid).sum())
    if invalid:
        warnings.append(f"{path}: {invalid} row(s) without a known status, start_time or users were skipped")
        df = df[valid.to_numpy()]
    if df.empty:
        raise ReportError(f"{path}: no usable request rows")
    df, run = select_run(df, path, run_id, warnings)
    warmup = _warmup_mask(df)
    if warmup.any():  # the warm-up is left out of every verdict: steps, capacity, cost, sessions, traffic
        df = df[~warmup].reset_index(drop=True)
        if df.empty:
            raise ReportError(f"{path}: every row is of the warm-up (phase=warmup): the run measured nothing after it")
    df = df.sort_values("start_time", kind="stable").reset_index(drop=True)
    df["status"] = df["status"].astype("string").astype("category")
    ok = (df["status"] == "ok").to_numpy()
    df["ok"] = ok
    e2e = df["e2e_ms"].to_numpy(dtype=float) if "e2e_ms" in df.columns else np.full(len(df), np.nan)
    df["end_time"] = df["start_time"].to_numpy() + np.nan_to_num(e2e) / 1000.0
    # Open-loop runs step their arrival rate, not their users: steps follow the rate then.
    level = "users"
    if "arrival_rate" in df.columns and df["arrival_rate"].notna().mean() >= 0.5:
        level = "arrival_rate"
        df = df[df["arrival_rate"].notna().to_numpy()].reset_index(drop=True)
    df["level"] = df[level].to_numpy(dtype=float)
    return Loaded(path=path, df=df, warnings=warnings, level=level, run_id=run, warmup_rows=int(warmup.sum()))


def _warmup_mask(df: pd.DataFrame) -> np.ndarray:
    if "phase" not in df.columns:
        return np.zeros(len(df), dtype=bool)
    return (df["phase"].astype("string").fillna("") == files.WARMUP_PHASE).to_numpy(dtype=bool)
