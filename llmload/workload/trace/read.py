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
* ``weka``, ``otel``, ``sglang``: agentic traces, each entry a whole session (a call graph:
  :mod:`.graph_trace`): the Weka coding-agent trace AIPerf replays (:mod:`.weka`),
  inference-perf's OpenTelemetry GenAI spans (:mod:`.otel_spans`), SGLang's agentic trace
  dataset (:mod:`.sglang_agentic`).
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
import os
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field, replace

from llmload.workload.trace.formats import (
    AZURE_COLUMNS,
    TraceError,
    TraceRequest,
    read_azure,
    read_burstgpt,
    read_mooncake,
    read_plain,
)
from llmload.workload.trace.graph_trace import GRAPH_FORMATS, load_sessions
from llmload.workload.trace.otel_spans import read_otel
from llmload.workload.trace.selection import loop_period, select, split_for_worker
from llmload.workload.trace.sglang_agentic import read_sglang
from llmload.workload.trace.weka import read_weka

__all__ = ["FORMATS", "Trace", "TraceError", "TraceRequest", "load_trace", "loop_period", "parse_trace", "select",
           "split_for_worker"]

FORMATS = ("mooncake", "azure", "burstgpt", "plain", *GRAPH_FORMATS)
GRAPH_READERS = {"weka": read_weka, "otel": read_otel, "sglang": read_sglang}
MAX_REQUESTS = 1_000_000
# The longest context a served model takes today is in the millions of tokens; a trace row past this
# is a broken row, and would have every user build a prompt of that size.
MAX_TOKENS_PER_REQUEST = 1 << 22
"""A parsed request holds ~150 bytes, ~1 KB with Mooncake's ~24 hash ids: 1M is 0.15-1 GB."""
MAX_LINE_CHARS = 1 << 20
"""A Mooncake line with 128k input tokens is ~2 KB; a line of a megabyte is not a trace."""


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
    if fmt in GRAPH_FORMATS or (fmt is None and _looks_agentic(path)):
        if models or log_types:
            raise TraceError(f"{path}: models and log_types filter BurstGPT traces only")
        fmt, sessions = load_sessions(path, fmt, GRAPH_READERS)
        rows = ((0, r.t, r) for r in sorted(sessions, key=lambda r: r.t))
        return _collect(rows, path, fmt, True, max_requests, read_until_s)
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
        rows = read_mooncake(all_lines, name)
    elif fmt == "plain":
        rows = read_plain(all_lines, name)
    elif fmt == "azure":
        rows = read_azure(csv.reader(all_lines), name)
    else:
        rows = read_burstgpt(csv.reader(all_lines), name, tuple(models), tuple(log_types))
    try:
        return _collect(rows, name, fmt, keep_zero_output, max_requests, read_until_s)
    except csv.Error as e:  # a NUL byte, an unclosed quote at the end, a field over csv's size limit
        raise TraceError(f"{name}: not valid CSV: {e}") from None


def _looks_agentic(path: str) -> bool:
    """A folder of sessions, a JSON document over several lines, or a first line that is a session of
    an agentic format."""
    if os.path.isdir(path):
        return True
    try:
        with open(path, encoding="utf-8-sig") as f:
            first = ""
            while not first.strip():
                first = f.readline(MAX_LINE_CHARS + 1)
                if not first:
                    return False
    except (OSError, UnicodeDecodeError):
        return False  # load_trace's own read says why
    s = first.strip()
    if s.startswith("["):
        return True
    if not s.startswith("{"):
        return False
    try:
        obj = json.loads(s)
    except ValueError:
        return True  # pretty-printed JSON: one session over many lines
    return isinstance(obj, dict) and bool({"requests", "spans", "conversations"} & obj.keys())


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
                     f"Azure ({','.join(AZURE_COLUMNS)}) or BurstGPT (Timestamp,Model,Request tokens,"
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
        sizes = ((c.input_tokens or 0, c.output_tokens or 0) for c in req.graph.calls) if req.graph is not None \
            else ((req.input_tokens, req.output_tokens),)
        for what, n in ((w, n) for pair in sizes for w, n in zip(("input tokens", "output tokens"), pair, strict=True)):
            if n > MAX_TOKENS_PER_REQUEST:
                raise TraceError(f"{name}:{lineno}: {what}: {n:,} is more than llmload sends in one request "
                                 f"({MAX_TOKENS_PER_REQUEST:,}): a broken row?")
        if len(out) >= max_requests:
            raise TraceError(f"{name}:{lineno}: more than {max_requests:,} requests: replay a part of the trace "
                             "(read_until_s, or a file cut with head -n), or raise max_requests")
        out.append(replace(req, t=t))
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
        out = [replace(r, t=r.t - t0) for r in out]
    return Trace(path=name, format=fmt, requests=out, notes=notes)
