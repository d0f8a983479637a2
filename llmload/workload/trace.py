"""Production traces as plain records: when each request came and how long it was.

Four formats, each read as its publisher wrote it (``scenarios/data/traces/README.md`` has the
sources and fields):

* ``mooncake``: Mooncake's JSONL (kvcache-ai/Mooncake ``FAST25-release/traces/*.jsonl``):
  ``timestamp`` in milliseconds, ``input_length``, ``output_length``, ``hash_ids`` (one id per
  512-token block; equal ids mean a shareable prefix). AIPerf's optional ``session_id`` is kept.
* ``azure``: Azure LLM inference traces (Azure/AzurePublicDataset
  ``AzureLLMInferenceTrace_{code,conv}*.csv``): ``TIMESTAMP`` (a date and time, fractional
  seconds, with or without a UTC offset), ``ContextTokens``, ``GeneratedTokens``.
* ``burstgpt``: BurstGPT CSV (HPMLL/BurstGPT): ``Timestamp`` (seconds), ``Model``,
  ``Request tokens``, ``Response tokens``, ``Total tokens``, ``Log Type``, and in newer
  releases ``Session ID`` (kept) and ``Elapsed time``. Rows can be kept by model and log type.
* ``plain``: llmload's own JSONL, ``{"t": seconds, "input_tokens": N, "output_tokens": N}``
  with optional ``prefix_id``, ``session_id`` and ``hash_ids``; unknown keys are errors.

Times become seconds from the trace's earliest request (``t`` = 0 there). Rows out of time
order are sorted (stably) and a note says so; rows asking for no output (BurstGPT's failed
requests) are dropped with a note unless ``keep_zero_output``. Files are read line by line, and
more than ``max_requests`` rows is an error rather than a machine out of memory.

:func:`select` cuts and stretches a parsed trace (window, speed, count, repeats) and
:func:`split_for_worker` deals it out to distributed workers; both are pure.

Usage::

    trace = load_trace("scenarios/data/traces/mooncake_sample.jsonl")   # format from the content
    for note in trace.notes:
        print(note)
    reqs = select(trace.requests, start=10, duration=30, time_scale=0.5, loop=3)
    mine = split_for_worker(reqs, worker_index=0, workers=4)   # every 4th request, times kept
"""

from __future__ import annotations

import csv
import itertools
import json
import math
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime

FORMATS = ("mooncake", "azure", "burstgpt", "plain")
MAX_REQUESTS = 1_000_000
"""A parsed request holds ~150 bytes, ~1 KB with Mooncake's ~24 hash ids: 1M is 0.15-1 GB."""
MAX_LINE_CHARS = 1 << 20
"""A Mooncake line with 128k input tokens is ~2 KB; a line of a megabyte is not a trace."""

_AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
_BURSTGPT_COLUMNS = ("Timestamp", "Request tokens", "Response tokens")
_PLAIN_KEYS = ("t", "input_tokens", "output_tokens", "prefix_id", "session_id", "hash_ids")


class TraceError(ValueError):
    """``file:line: key: what was expected, got what``."""


@dataclass(frozen=True, slots=True)
class TraceRequest:
    t: float
    """Seconds from the trace's earliest request (after :func:`select`: from the replay's start)."""
    input_tokens: int
    output_tokens: int
    hash_ids: tuple[int, ...] = ()
    """Mooncake's prefix blocks (512 tokens each): requests sharing leading ids share a prefix."""
    session_id: str = ""
    prefix_id: str = ""


@dataclass
class Trace:
    path: str
    format: str
    requests: list[TraceRequest]
    notes: list[str] = field(default_factory=list)
    """What was changed or dropped while reading (sorting, zero-output rows): worth printing once."""


def load_trace(path: str, fmt: str | None = None, *, models: Sequence[str] = (), log_types: Sequence[str] = (),
               keep_zero_output: bool = False, max_requests: int = MAX_REQUESTS,
               read_until_s: float | None = None) -> Trace:
    """Read a trace file. ``fmt`` is one of :data:`FORMATS`, or None to tell it from the content.

    ``models``/``log_types`` keep only BurstGPT rows with those ``Model``/``Log Type`` values.
    ``read_until_s`` stops reading at the first row more than that many seconds after the
    file's first row: a cheap window on a huge trace, right when the file is in time order (as
    the published traces are).
    """
    try:
        with open(path, encoding="utf-8-sig", newline="") as f:  # utf-8-sig drops a BOM; newline="" for csv
            return parse_trace(_capped_lines(f, path), path, fmt, models=models, log_types=log_types,
                               keep_zero_output=keep_zero_output, max_requests=max_requests,
                               read_until_s=read_until_s)
    except OSError as e:
        raise TraceError(f"{path}: cannot read the trace: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise TraceError(f"{path}: not UTF-8 text ({e.reason})") from None


def parse_trace(lines: Iterable[str], name: str, fmt: str | None = None, *, models: Sequence[str] = (),
                log_types: Sequence[str] = (), keep_zero_output: bool = False,
                max_requests: int = MAX_REQUESTS, read_until_s: float | None = None) -> Trace:
    """:func:`load_trace` over lines already at hand (``name`` is used in messages)."""
    if fmt is not None and fmt not in FORMATS:
        raise TraceError(f"{name}: format: expected one of {', '.join(FORMATS)}, got {json.dumps(fmt)}")
    if max_requests < 1:
        raise TraceError(f"{name}: max_requests: expected a whole number >= 1, got {max_requests}")
    it = iter(lines)
    first = next(it, None)
    head: list[str] = []
    while first is not None and not first.strip():  # leading blank lines
        head.append(first)
        first = next(it, None)
    if first is None:
        raise TraceError(f"{name}: empty trace: no header and no requests")
    first = first.removeprefix("\ufeff")
    if fmt is None:
        fmt = _detect(first, name, len(head) + 1)
    if (models or log_types) and fmt != "burstgpt":
        raise TraceError(f"{name}: models and log_types filter BurstGPT traces only; this is a {fmt} trace")
    all_lines = itertools.chain(head, [first], it)
    rows: Iterator[tuple[int, float, TraceRequest]]
    if fmt == "mooncake":
        rows = _mooncake(all_lines, name)
    elif fmt == "plain":
        rows = _plain(all_lines, name)
    elif fmt == "azure":
        rows = _azure(csv.reader(all_lines), name)
    else:
        rows = _burstgpt(csv.reader(all_lines), name, tuple(models), tuple(log_types))
    return _collect(rows, name, fmt, keep_zero_output, max_requests, read_until_s)


def _capped_lines(f, path: str) -> Iterator[str]:
    n = 0
    while True:
        line = f.readline(MAX_LINE_CHARS + 1)
        if not line:
            return
        n += 1
        if len(line) > MAX_LINE_CHARS:
            raise TraceError(f"{path}:{n}: line longer than {MAX_LINE_CHARS:,} characters: not a trace file?")
        yield line


def _detect(first: str, name: str, lineno: int) -> str:
    s = first.strip()
    if s.startswith("{"):
        try:
            keys = json.loads(s).keys()
        except (ValueError, AttributeError):
            raise TraceError(f"{name}:{lineno}: the first line starts like JSON but is not a JSON object") from None
        if "timestamp" in keys or "input_length" in keys:
            return "mooncake"
        if "t" in keys or "input_tokens" in keys:
            return "plain"
        raise TraceError(f"{name}:{lineno}: cannot tell the trace format from keys {sorted(keys)}: expected "
                         "Mooncake (timestamp, input_length, output_length, hash_ids) or plain "
                         "(t, input_tokens, output_tokens)")
    header = [c.strip() for c in next(csv.reader([s]))]
    if "ContextTokens" in header or "TIMESTAMP" in header:
        return "azure"
    if "Request tokens" in header or "Response tokens" in header:
        return "burstgpt"
    raise TraceError(f"{name}:{lineno}: cannot tell the trace format from the header {s[:120]!r}: expected "
                     f"Azure ({','.join(_AZURE_COLUMNS)}) or BurstGPT (Timestamp,Model,Request tokens,"
                     "Response tokens,Total tokens,Log Type), or JSON lines")


def _collect(rows: Iterator[tuple[int, float, TraceRequest]], name: str, fmt: str, keep_zero_output: bool,
             max_requests: int, read_until_s: float | None) -> Trace:
    """Rows carry the trace's own absolute time (``t`` unset): rebase to the first row as they
    come, so the common sorted case needs no second pass."""
    out: list[TraceRequest] = []
    t_first: float | None = None
    prev = -math.inf
    unsorted = 0
    first_unsorted = 0
    zero = 0
    stopped_at = 0
    for lineno, t_abs, req in rows:
        if t_first is None:
            t_first = t_abs
        t = t_abs - t_first
        if read_until_s is not None and t > read_until_s:
            stopped_at = lineno
            break
        if req.output_tokens == 0 and not keep_zero_output:
            zero += 1
            continue
        if t < prev:
            unsorted += 1
            first_unsorted = first_unsorted or lineno
        else:
            prev = t
        if len(out) >= max_requests:
            raise TraceError(f"{name}:{lineno}: more than {max_requests:,} requests: replay a part of the trace "
                             "(read_until_s, or a file cut with head -n), or raise max_requests")
        out.append(TraceRequest(t, req.input_tokens, req.output_tokens, req.hash_ids, req.session_id, req.prefix_id))
    notes = []
    if zero:
        notes.append(f"{name}: skipped {zero:,} requests with 0 output tokens (failed requests in BurstGPT); "
                     "keep_zero_output keeps them")
    if stopped_at:
        notes.append(f"{name}: stopped reading at line {stopped_at}, past read_until_s={read_until_s:g} s")
    if not out:
        raise TraceError(f"{name}: no requests in the trace" + (" (every row had 0 output tokens)" if zero else ""))
    if unsorted:
        out.sort(key=lambda r: r.t)  # list.sort is stable: equal times keep their file order
        notes.append(f"{name}: {unsorted:,} rows out of time order (first at line {first_unsorted}); sorted by time, "
                     "equal times kept in file order")
    t0 = out[0].t
    if t0 != 0.0:  # a row earlier than the first one: make the earliest request t = 0
        out = [TraceRequest(r.t - t0, r.input_tokens, r.output_tokens, r.hash_ids, r.session_id, r.prefix_id)
               for r in out]
    return Trace(path=name, format=fmt, requests=out, notes=notes)


# ---- values -------------------------------------------------------------------------------------

def _err(name: str, lineno: int, key: str, expected: str, got: object) -> TraceError:
    return TraceError(f"{name}:{lineno}: {key}: expected {expected}, got {json.dumps(got)}")


def _whole(v: object) -> int | None:
    """A whole number >= 0 from JSON (5, 5.0) or a CSV cell ("5"); None when it is not one."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int):
        return v if v >= 0 else None
    if isinstance(v, float):
        return int(v) if v >= 0 and v.is_integer() else None
    if isinstance(v, str):
        try:
            n = int(v)
        except ValueError:
            try:
                x = float(v)
            except ValueError:
                return None
            return int(x) if x >= 0 and x.is_integer() else None
        return n if n >= 0 else None
    return None


def _number(v: object) -> float | None:
    """A finite number >= 0 from JSON or a CSV cell; None when it is not one."""
    if isinstance(v, bool):
        return None
    if isinstance(v, int | float):
        x = float(v)
    elif isinstance(v, str):
        try:
            x = float(v)
        except ValueError:
            return None
    else:
        return None
    return x if x >= 0 and math.isfinite(x) else None


def _json_object(line: str, name: str, lineno: int) -> dict:
    try:
        obj = json.loads(line)
    except ValueError as e:
        raise TraceError(f"{name}:{lineno}: not valid JSON: {e}") from None
    if not isinstance(obj, dict):
        raise TraceError(f"{name}:{lineno}: expected a JSON object, got {type(obj).__name__}")
    return obj


def _get_whole(obj: dict, key: str, name: str, lineno: int) -> int:
    if key not in obj:
        raise TraceError(f"{name}:{lineno}: {key}: missing")
    n = _whole(obj[key])
    if n is None:
        raise _err(name, lineno, key, "a whole number >= 0", obj[key])
    return n


def _hash_ids(v: object, name: str, lineno: int) -> tuple[int, ...]:
    if not isinstance(v, list):
        raise _err(name, lineno, "hash_ids", "a list of whole numbers >= 0", v)
    if all(type(x) is int and x >= 0 for x in v):  # the usual case, at a third of the cost of the loop below
        return tuple(v)
    out = []
    for i, x in enumerate(v):
        n = _whole(x) if not isinstance(x, str) else None
        if n is None:
            raise _err(name, lineno, f"hash_ids[{i}]", "a whole number >= 0", x)
        out.append(n)
    return tuple(out)


def _text(obj: dict, key: str, name: str, lineno: int) -> str:
    v = obj.get(key, "")
    if isinstance(v, bool) or not isinstance(v, str | int):
        raise _err(name, lineno, key, "a string", v)
    return str(v)


# ---- formats ------------------------------------------------------------------------------------
# Each yields (line number, absolute time in seconds, request with t unset).

def _mooncake(lines: Iterable[str], name: str) -> Iterator[tuple[int, float, TraceRequest]]:
    for lineno, line in enumerate(lines, 1):
        s = line.strip()
        if not s:
            continue
        obj = _json_object(s, name, lineno)
        if "timestamp" not in obj:
            raise TraceError(f"{name}:{lineno}: timestamp: missing (milliseconds from the trace start)")
        ms = _number(obj["timestamp"])
        if ms is None:
            raise _err(name, lineno, "timestamp", "milliseconds >= 0", obj["timestamp"])
        yield lineno, ms / 1000.0, TraceRequest(
            0.0, _get_whole(obj, "input_length", name, lineno), _get_whole(obj, "output_length", name, lineno),
            _hash_ids(obj["hash_ids"], name, lineno) if "hash_ids" in obj else (),
            _text(obj, "session_id", name, lineno))


def _plain(lines: Iterable[str], name: str) -> Iterator[tuple[int, float, TraceRequest]]:
    for lineno, line in enumerate(lines, 1):
        s = line.strip()
        if not s:
            continue
        obj = _json_object(s, name, lineno)
        for key in obj:
            if key not in _PLAIN_KEYS:
                raise TraceError(f"{name}:{lineno}: {key}: unknown key; expected {', '.join(_PLAIN_KEYS)}")
        if "t" not in obj:
            raise TraceError(f"{name}:{lineno}: t: missing (seconds from the trace start)")
        t = _number(obj["t"])
        if t is None:
            raise _err(name, lineno, "t", "seconds >= 0", obj["t"])
        yield lineno, t, TraceRequest(
            0.0, _get_whole(obj, "input_tokens", name, lineno), _get_whole(obj, "output_tokens", name, lineno),
            _hash_ids(obj["hash_ids"], name, lineno) if "hash_ids" in obj else (),
            _text(obj, "session_id", name, lineno), _text(obj, "prefix_id", name, lineno))


def _header(reader, name: str, required: tuple[str, ...], label: str) -> dict[str, int]:
    for row in reader:
        if not row or not any(c.strip() for c in row):
            continue
        cols = {c.strip().removeprefix("\ufeff"): i for i, c in enumerate(row)}
        missing = [c for c in required if c not in cols]
        if missing:
            raise TraceError(f"{name}:{reader.line_num}: header: missing column {', '.join(missing)} "
                             f"({label} needs {', '.join(required)}); got {', '.join(cols)}")
        return cols
    raise TraceError(f"{name}: empty trace: no header and no requests")


def _cells(reader, name: str, width: int) -> Iterator[list[str]]:
    for row in reader:
        if not row or (len(row) == 1 and not row[0].strip()):
            continue  # a blank line (csv gives [] for it)
        if len(row) < width:
            raise TraceError(f"{name}:{reader.line_num}: expected {width} columns, got {len(row)}: {','.join(row)!r}")
        yield row


def _azure(reader, name: str) -> Iterator[tuple[int, float, TraceRequest]]:
    cols = _header(reader, name, _AZURE_COLUMNS, "an Azure LLM inference trace")
    i_t, i_in, i_out = (cols[c] for c in _AZURE_COLUMNS)
    width = max(cols.values()) + 1
    anchor: datetime | None = None
    for row in _cells(reader, name, width):
        lineno = reader.line_num
        cell = row[i_t].strip()
        try:
            dt = datetime.fromisoformat(cell)
        except ValueError:
            raise _err(name, lineno, "TIMESTAMP", "a date and time like 2023-11-16 18:17:03.9799600", cell) from None
        if dt.tzinfo is None:  # the 2023 files carry no offset, the 2024 ones +00:00: both are UTC
            dt = dt.replace(tzinfo=UTC)
        n_in, n_out = _whole(row[i_in].strip()), _whole(row[i_out].strip())
        if n_in is None:
            raise _err(name, lineno, "ContextTokens", "a whole number >= 0", row[i_in])
        if n_out is None:
            raise _err(name, lineno, "GeneratedTokens", "a whole number >= 0", row[i_out])
        if anchor is None:
            anchor = dt
        # seconds from the first row by timedelta: exact to the microsecond, unlike epoch floats
        yield lineno, (dt - anchor).total_seconds(), TraceRequest(0.0, n_in, n_out)


def _burstgpt(reader, name: str, models: tuple[str, ...],
              log_types: tuple[str, ...]) -> Iterator[tuple[int, float, TraceRequest]]:
    cols = _header(reader, name, _BURSTGPT_COLUMNS, "a BurstGPT trace")
    for key, wanted in (("Model", models), ("Log Type", log_types)):
        if wanted and key not in cols:
            raise TraceError(f"{name}: header: no {key} column to filter on")
    i_t, i_in, i_out = (cols[c] for c in _BURSTGPT_COLUMNS)
    i_model, i_log, i_session = cols.get("Model"), cols.get("Log Type"), cols.get("Session ID")
    width = max(cols.values()) + 1
    seen: dict[str, set[str]] = {"Model": set(), "Log Type": set()}
    kept = 0
    for row in _cells(reader, name, width):
        lineno = reader.line_num
        if models and (m := row[i_model].strip()) not in models:
            if len(seen["Model"]) < 50:
                seen["Model"].add(m)
            continue
        if log_types and (lt := row[i_log].strip()) not in log_types:
            if len(seen["Log Type"]) < 50:
                seen["Log Type"].add(lt)
            continue
        t = _number(row[i_t].strip())
        if t is None:
            raise _err(name, lineno, "Timestamp", "seconds >= 0", row[i_t])
        n_in, n_out = _whole(row[i_in].strip()), _whole(row[i_out].strip())
        if n_in is None:
            raise _err(name, lineno, "Request tokens", "a whole number >= 0", row[i_in])
        if n_out is None:
            raise _err(name, lineno, "Response tokens", "a whole number >= 0", row[i_out])
        session = row[i_session].strip() if i_session is not None else ""
        kept += 1
        yield lineno, t, TraceRequest(0.0, n_in, n_out, (), session)
    if not kept and (models or log_types):
        wanted = "; ".join(f"{k} in {list(v)}" for k, v in (("Model", models), ("Log Type", log_types)) if v)
        other = "; ".join(f"{k}: {', '.join(sorted(v))}" for k, v in seen.items() if v)
        raise TraceError(f"{name}: no row matches {wanted}"
                         + (f" (other values in the file: {other})" if other else ""))


# ---- replay options -----------------------------------------------------------------------------

def select(requests: Sequence[TraceRequest], *, time_scale: float = 1.0, start: float = 0.0,
           duration: float | None = None, limit: int | None = None, loop: int = 1) -> list[TraceRequest]:
    """The part of a parsed (time-ordered) trace to replay, with times from the replay's start.

    Keeps requests with ``start <= t < start + duration`` (trace seconds), then the first
    ``limit`` of them; times become ``(t - start) * time_scale`` (0.5 replays twice as fast);
    ``loop`` N plays the result N times end to end, each copy shifted by :func:`loop_period`.
    """
    if not (time_scale > 0 and math.isfinite(time_scale)):
        raise TraceError(f"time_scale: expected a number > 0, got {time_scale}")
    if not (start >= 0 and math.isfinite(start)):
        raise TraceError(f"start: expected seconds >= 0, got {start}")
    if duration is not None and not (duration > 0):
        raise TraceError(f"duration: expected seconds > 0, got {duration}")
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 1):
        raise TraceError(f"limit: expected a whole number >= 1, got {limit}")
    if isinstance(loop, bool) or not isinstance(loop, int) or loop < 1:
        raise TraceError(f"loop: expected a whole number >= 1, got {loop}")
    end = math.inf if duration is None else start + duration
    picked = [r for r in requests if start <= r.t < end]
    if limit is not None:
        picked = picked[:limit]
    if not picked:
        span = f"{requests[0].t:g}-{requests[-1].t:g} s" if requests else "no requests"
        raise TraceError(f"no request in the window start={start:g} s, duration={duration} (the trace spans {span})")
    base = [TraceRequest((r.t - start) * time_scale, r.input_tokens, r.output_tokens, r.hash_ids, r.session_id,
                         r.prefix_id) for r in picked]
    if loop == 1:
        return base
    period = loop_period(base)
    out = list(base)
    for k in range(1, loop):
        shift = k * period
        out.extend(TraceRequest(r.t + shift, r.input_tokens, r.output_tokens, r.hash_ids, r.session_id, r.prefix_id)
                   for r in base)
    return out


def loop_period(requests: Sequence[TraceRequest]) -> float:
    """How far each repeat of a trace is shifted: its span plus its mean gap, so the seam between
    two copies looks like any other gap and the rate stays the trace's own."""
    if len(requests) < 2:
        raise TraceError("loop: a trace of one request has no period; give it at least two")
    span = requests[-1].t - requests[0].t
    if span <= 0:
        raise TraceError("loop: every request has the same time, so the trace has no period")
    return span + span / (len(requests) - 1)


def split_for_worker(requests: Sequence[TraceRequest], worker_index: int, workers: int,
                     keep_sessions: bool = False) -> list[TraceRequest]:
    """This worker's share of a trace: every ``workers``-th request from ``worker_index``, times
    unchanged (every worker replays from the same start), so the shares tile the trace exactly
    and each carries an even slice of its load at every moment.

    With ``keep_sessions`` the unit dealt round-robin is a session (requests with the same
    non-empty ``session_id``, in order of first appearance) so one worker plays a conversation
    in order; requests without a session are dealt one by one as before.
    """
    if isinstance(workers, bool) or not isinstance(workers, int) or workers < 1:
        raise TraceError(f"workers: expected a whole number >= 1, got {workers}")
    if isinstance(worker_index, bool) or not isinstance(worker_index, int) or not 0 <= worker_index < workers:
        raise TraceError(f"worker_index: expected 0..{workers - 1}, got {worker_index}")
    if not keep_sessions:
        return list(requests[worker_index::workers])
    owner: dict[str, int] = {}
    unit = 0
    out = []
    for r in requests:
        if r.session_id:
            w = owner.get(r.session_id)
            if w is None:
                w = owner[r.session_id] = unit % workers
                unit += 1
        else:
            w = unit % workers
            unit += 1
        if w == worker_index:
            out.append(r)
    return out

