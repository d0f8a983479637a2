"""One trace file's rows, format by format: the four readers and the value checks they share.

Each reader takes the file's lines (or a ``csv.reader`` over them) and yields, per request,
``(line number, absolute time in seconds, TraceRequest with t unset)``; :mod:`.trace` detects
the format, rebases the times and collects the rows. Every bad value is one
:class:`TraceError` naming the file, the line, the key and what was expected. Pure.

Usage::

    rows = read_mooncake(open("trace.jsonl"), "trace.jsonl")
    lineno, t_seconds, request = next(rows)
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from llmload.workload.json_text import json_lines

AZURE_COLUMNS = ("TIMESTAMP", "ContextTokens", "GeneratedTokens")
BURSTGPT_COLUMNS = ("Timestamp", "Request tokens", "Response tokens")
PLAIN_KEYS = ("t", "input_tokens", "output_tokens", "prefix_id", "session_id", "hash_ids")


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
    graph: Any = None
    """An agentic trace's session (a :class:`~llmload.workload.tasks.call_graph.CallGraph`): ``t`` is its
    start, the calls run by their dependencies and recorded gaps (:mod:`.graph_trace`)."""



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

def read_mooncake(lines: Iterable[str], name: str) -> Iterator[tuple[int, float, TraceRequest]]:
    for lineno, obj in json_lines(lines, name, TraceError):
        if "timestamp" not in obj:
            raise TraceError(f"{name}:{lineno}: timestamp: missing (milliseconds from the trace start)")
        ms = _number(obj["timestamp"])
        if ms is None:
            raise _err(name, lineno, "timestamp", "milliseconds >= 0", obj["timestamp"])
        yield lineno, ms / 1000.0, TraceRequest(
            0.0, _get_whole(obj, "input_length", name, lineno), _get_whole(obj, "output_length", name, lineno),
            _hash_ids(obj["hash_ids"], name, lineno) if "hash_ids" in obj else (),
            _text(obj, "session_id", name, lineno))


def read_plain(lines: Iterable[str], name: str) -> Iterator[tuple[int, float, TraceRequest]]:
    for lineno, obj in json_lines(lines, name, TraceError):
        for key in obj:
            if key not in PLAIN_KEYS:
                raise TraceError(f"{name}:{lineno}: {key}: unknown key; expected {', '.join(PLAIN_KEYS)}")
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


def read_azure(reader, name: str) -> Iterator[tuple[int, float, TraceRequest]]:
    cols = _header(reader, name, AZURE_COLUMNS, "an Azure LLM inference trace")
    i_t, i_in, i_out = (cols[c] for c in AZURE_COLUMNS)
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


def read_burstgpt(reader, name: str, models: tuple[str, ...],
              log_types: tuple[str, ...]) -> Iterator[tuple[int, float, TraceRequest]]:
    cols = _header(reader, name, BURSTGPT_COLUMNS, "a BurstGPT trace")
    for key, wanted in (("Model", models), ("Log Type", log_types)):
        if wanted and key not in cols:
            raise TraceError(f"{name}: header: no {key} column to filter on")
    i_t, i_in, i_out = (cols[c] for c in BURSTGPT_COLUMNS)
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

