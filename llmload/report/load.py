"""Reading PREFIX_requests.csv: what is there, and a warning for everything that is not."""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np
import pandas as pd
from pandas.api.types import union_categoricals

from llmload import files
from llmload.files import REQUESTS_COLUMNS as CSV_COLUMNS
from llmload.metrics import catalog
from llmload.metrics.record import STATUSES
from llmload.report.server_join import join_rows


class ReportError(Exception):
    """Input the report cannot be made from; the message says what and where."""


REQUIRED = ("start_time", "status", "users")
HEAD_BYTES = 1 << 16
NUMERIC = ("start_time", "http_status", *(m.row_column for m in catalog.ROW_METRICS), "prompt_tokens",
           "cached_tokens", "completion_tokens", "max_tokens", "users", "worker", "turn",
           "scheduled_time", "requested_input_tokens", "arrival_rate", "coalesced_reads", "requested_image_tokens",
           "backoff_ms", "inputs", "audio_seconds", "resent_input_tokens")
TEXT = ("request_id", "scenario", "status", "token_source", "finish_reason", "session_id", "error", "step_kind",
        "run_id", "call_id", "call_after", "trace_id", "phase", "model", "priority")
# What the report reads of each row, and in which type. Every column is still parsed (see _read_one),
# but only these are kept, chunk by chunk, so 10 M rows fit in a few GB. float64 for everything
# whose value the report prints or compares (times, latencies, arrival rates); float32 for whole
# counts (exact below 2**24); categories for the repeated strings.
KEEP_FLOAT64 = ("start_time", *(m.row_column for m in catalog.ROW_METRICS), "arrival_rate", "scheduled_time")
KEEP_FLOAT32 = ("users", "prompt_tokens", "cached_tokens", "completion_tokens", "turn", "requested_image_tokens",
                "inputs", "audio_seconds", "http_status")
KEEP_CATEGORY = ("scenario", "status", "run_id", "session_id", "step_kind", "finish_reason", "phase", "model",
                 "priority")
KEEP_TEXT = ("call_id", "call_after")  # a call graph's ids: kept as text (nearly every value differs)
CHUNK_ROWS = 1_000_000
EXTRA = "\0extra"  # a name no header has: a field past the header's last
UNKNOWN = "\0unknown"


@dataclass
class Loaded:
    path: str
    df: pd.DataFrame
    warnings: list[str] = field(default_factory=list)
    level: str = "users"  # what the load steps are: "users", or "arrival_rate" for open-loop runs
    run_id: str | None = None  # the run the rows are of (None: rows written before runs had ids)
    warmup_rows: int = 0  # rows of the run's --warmup-seconds warm-up (phase=warmup), left out of df
    warmup_timing: pd.DataFrame | None = None
    """Those rows' times (server_join.JOIN_COLUMNS): the server counted them too, so the server
    comparison's client side needs their first tokens and ends that fell inside a step."""


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
    ids = _filled(df["run_id"], "")
    named = ids[ids != ""].unique()
    if len(named) == 1 and (ids == "").any():
        # Rows without an id next to one run: a worker's first rows, shipped before its master told
        # it the run id (a late joiner). They are that run's; say so.
        warnings.append(f"{path}: {int((ids == '').sum())} row(s) without a run_id were read as run {named[0]}'s "
                        "(a worker's rows from before its master told it the run id)")
        ids = ids.where(ids != "", named[0])
        df = df.assign(run_id=ids.to_numpy())
    counts = ids.value_counts(sort=False)
    counts = counts[counts > 0]  # categories: value_counts lists unused ones too
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
    frames = [_read_one(requests_path(p), warnings, keep_ids=len(sources) > 1) for p in sources]
    path = ", ".join(requests_path(p) for p in sources)
    df = frames[0] if len(frames) == 1 else _concat(frames, list(dict.fromkeys(c for f in frames for c in f.columns)))
    if len(frames) > 1 and "request_id" in df.columns:
        dup = df["request_id"].notna() & df["request_id"].duplicated()
        if dup.any():
            warnings.append(f"{int(dup.sum())} request(s) found in more than one file were counted once")
            df = df[~dup.to_numpy()].reset_index(drop=True)
    return _finish(path, df, warnings, run_id)


class _Head:
    """``first``, then the bytes of a binary file up to offset ``limit``, for a parser that reads until EOF."""

    def __init__(self, f: BinaryIO, limit: int, first: bytes = b"") -> None:
        self._f, self._left, self._first = f, limit - f.tell(), first

    def read(self, n: int = -1) -> bytes:
        if self._first:
            k = len(self._first) if n is None or n < 0 else min(n, len(self._first))
            data, self._first = self._first[:k], self._first[k:]
            return data
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


def _read_one(path: str, warnings: list[str], keep_ids: bool = False) -> pd.DataFrame:
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
    keep = [c for c in (*KEEP_FLOAT64, *KEEP_FLOAT32, *KEEP_CATEGORY, *KEEP_TEXT,
                        *(("request_id",) if keep_ids else ())) if c in usecols]
    # Only the kept columns are parsed, in chunks (one chunk's parse held at a time). A line with more
    # fields than the header must be seen and skipped, not read as if it fitted (usecols alone ignores
    # extra fields): one name more than the header (EXTRA) catches a line's first extra field, and the
    # rows where it is set are dropped. The C parser accepts more names than fields only when a line
    # of the first chunk has that many, so a blank line with the extra field goes first (row 0, dropped).
    names = [c if c in CSV_COLUMNS else f"{UNKNOWN}{i}" for i, c in enumerate(header)] + [EXTRA]
    dtypes = {c: "category" for c in KEEP_CATEGORY if c in keep} | {EXTRA: "object", "request_id": "string"} | {
        c: "string" for c in KEEP_TEXT}
    header_end = head.index(b"\n") + 1 if b"\n" in head else len(head)
    parts: list[pd.DataFrame] = []
    lost: dict[str, int] = {}
    skipped: list[int] = []
    try:
        with open(path, "rb") as f:
            f.seek(header_end)
            stream = _Head(f, limit, head[:header_end] + b"," * len(header) + b"x\n")
            reader = pd.read_csv(stream, header=0, names=names, usecols=[*keep, EXTRA],
                                 dtype={k: v for k, v in dtypes.items() if k in keep or k == EXTRA},
                                 keep_default_na=False, na_values=[""], engine="c", chunksize=CHUNK_ROWS)
            for chunk in reader:
                extra = chunk[EXTRA].notna().to_numpy()
                extra_at = chunk.index[extra]
                skipped += [int(i) + 1 for i in extra_at if i > 0]  # row i is line i + 1: header, blank, data
                if extra.any():
                    chunk = chunk[~extra]
                parts.append(_compact(chunk, keep, lost))
    except (ValueError, pd.errors.ParserError, UnicodeDecodeError) as e:
        raise ReportError(f"{path}: cannot parse: {e}") from None
    if skipped:
        warnings.append(f"{path}: {len(skipped)} line(s) with more fields than the header were skipped (first: "
                        f"line {min(skipped)}); was the file written by another tool or version?")
    for c, n in lost.items():
        warnings.append(f"{path}: column {c}: {n} value(s) that are not numbers were ignored")
    return _concat(parts, keep)


def _filled(col: pd.Series, value: str) -> pd.Series:
    """A text column as categories, with ``value`` where it is empty (without a string per row)."""
    col = col if isinstance(col.dtype, pd.CategoricalDtype) else col.astype("category")
    if col.isna().any():
        if value not in col.cat.categories:
            col = col.cat.add_categories([value])
        col = col.fillna(value)
    return col


def _compact(chunk: pd.DataFrame, keep: list[str], lost: dict[str, int]) -> pd.DataFrame:
    """The kept columns of one parsed chunk, numbers as numbers (``lost`` counts what was not one)."""
    out = {}
    for c in keep:
        col = chunk[c]
        if c in KEEP_CATEGORY:
            out[c] = col if isinstance(col.dtype, pd.CategoricalDtype) else col.astype("category")
            continue
        if c == "request_id" or c in KEEP_TEXT:
            out[c] = col
            continue
        if not pd.api.types.is_numeric_dtype(col):
            before = int(col.notna().sum())
            col = pd.to_numeric(col, errors="coerce")
            if before - int(col.notna().sum()):
                lost[c] = lost.get(c, 0) + before - int(col.notna().sum())
        out[c] = col.astype("float32" if c in KEEP_FLOAT32 else "float64")
    return pd.DataFrame(out, index=chunk.index)


def _concat(parts: list[pd.DataFrame], keep: list[str]) -> pd.DataFrame:
    """The chunks as one frame; each category column over the union of the chunks' categories."""
    if not parts:
        return pd.DataFrame({c: pd.Series(dtype="category" if c in KEEP_CATEGORY else "float64") for c in keep})
    if len(parts) == 1:
        return parts[0].reset_index(drop=True)
    cats = {c: union_categoricals([_as_category(p, c) for p in parts]) for c in keep if c in KEEP_CATEGORY}
    df = pd.concat([p.drop(columns=[c for c in cats if c in p.columns]) for p in parts], ignore_index=True)
    for c, values in cats.items():
        df[c] = pd.Categorical(values)
    return df[keep]


def _as_category(part: pd.DataFrame, column: str) -> pd.Categorical:
    """A part's category column; all empty when that file has no such column."""
    if column in part.columns:
        return pd.Categorical(part[column])
    return pd.Categorical([None] * len(part), categories=pd.Index([], dtype=object))


def _finish(path: str, df: pd.DataFrame, warnings: list[str], run_id: str | None) -> Loaded:
    if "scenario" not in df.columns:
        df["scenario"] = pd.Categorical(["default"] * len(df))
    df["scenario"] = _filled(df["scenario"], "default")
    valid = df["status"].isin(STATUSES) & df["start_time"].notna() & df["users"].notna()
    invalid = int((~valid).sum())
    if invalid:
        warnings.append(f"{path}: {invalid} row(s) without a known status, start_time or users were skipped")
        df = df[valid.to_numpy()]
    if df.empty:
        raise ReportError(f"{path}: no usable request rows")
    df, run = select_run(df, path, run_id, warnings)
    warmup = _warmup_mask(df)
    warmup_timing = None
    if warmup.any():  # the warm-up is left out of every verdict: steps, capacity, cost, sessions, traffic
        warmup_timing = join_rows(df[warmup])
        df = df[~warmup].reset_index(drop=True)
        if df.empty:
            raise ReportError(f"{path}: every row is of the warm-up (phase=warmup): the run measured nothing after it")
    if not df["start_time"].is_monotonic_increasing:  # a sort moves every column: only when needed
        df = df.sort_values("start_time", kind="stable")
    df = df.reset_index(drop=True)
    df["status"] = _filled(df["status"], "").cat.remove_unused_categories()
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
    return Loaded(path=path, df=df, warnings=warnings, level=level, run_id=run, warmup_rows=int(warmup.sum()),
                  warmup_timing=warmup_timing)


def _warmup_mask(df: pd.DataFrame) -> np.ndarray:
    if "phase" not in df.columns:
        return np.zeros(len(df), dtype=bool)
    return (df["phase"] == files.WARMUP_PHASE).to_numpy(dtype=bool)  # categories: no string per row
