"""Agentic traces as call-graph sessions (issue 23): what the three readers share. Pure, but the file read.

A reader (:mod:`.weka`, :mod:`.otel_spans`, :mod:`.sglang_agentic`) turns one recorded session into
:class:`RecordedCall` s: each call's parents, its recorded start and end (trace seconds, any
origin) and what to send. :func:`session_entry` makes the session one trace entry
(:class:`~.formats.TraceRequest` with ``graph`` set): ``t`` is its first call's start, and each
call's ``wait_s`` the recorded gap from the end of its last parent to its start (a root's: from the
session's start). The replay sends a root at ``t0 + t + wait_s`` and a child ``wait_s`` after its
last parent really ended, so a call never starts before its parents end, whatever the server's speed.

Files: one JSON object (a session), a JSON list of them, or JSON lines (one object per line); or a
folder of such files (a capture per session, as AIPerf and inference-perf take them).

Usage::

    entries = load_sessions("scenarios/data/traces/weka_sample.json", "weka")
    entries[0].graph.calls[0]          # GraphCall(id="r0", after=(), input_tokens=..., hash_ids=...)
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from llmload.workload.json_text import json_lines
from llmload.workload.tasks.call_graph import GraphCall, GraphError, check_graph
from llmload.workload.trace.formats import TraceError, TraceRequest

GRAPH_FORMATS = ("weka", "otel", "sglang")
MAX_FILE_CHARS = 256 << 20
"""A trace file read whole: 256 MB of JSON is ~100k calls; more is a machine out of memory."""
MAX_SESSION_CALLS = 20_000
"""A recorded coding-agent session runs to hundreds of calls; tens of thousands is a broken file."""


@dataclass(frozen=True)
class RecordedCall:
    id: str
    after: tuple[str, ...]
    start_s: float  # trace seconds, the reader's own origin
    end_s: float  # start_s + the recorded duration (start_s when none was recorded)
    output_tokens: int
    input_tokens: int | None = None  # a prompt of this many words from hash_ids (Weka)
    hash_ids: tuple[int, ...] = ()
    messages: tuple[dict, ...] | None = None  # recorded messages (OTel: the whole prompt; SGLang: the new ones)
    context: str = "fresh"  # parent: the first parent's messages and its live reply come first (SGLang)
    block_tokens: int = 0
    replies: tuple[tuple[int, str], ...] = ()  # (message index, ancestor call id): its live reply goes there


def session_entry(session_id: str, calls: list[RecordedCall], name: str) -> TraceRequest:
    """One session as a trace entry, or TraceError naming the file and the session."""
    if not calls:
        raise TraceError(f"{name}: session {session_id!r}: no calls")
    t0 = min(c.start_s for c in calls)
    ends = {c.id: c.end_s for c in calls}
    out = []
    for c in calls:
        parents_end = [ends[p] for p in c.after if p in ends]  # an unknown parent: check_graph names it
        wait = max(0.0, c.start_s - max(parents_end)) if parents_end else c.start_s - t0
        out.append(GraphCall(c.id, c.after, c.context, 0, max(1, c.output_tokens), wait,
                             input_tokens=c.input_tokens, hash_ids=c.hash_ids, messages=c.messages,
                             block_tokens=c.block_tokens, replies=c.replies))
    try:
        graph = check_graph(out, max_calls=MAX_SESSION_CALLS)
    except GraphError as e:
        raise TraceError(f"{name}: session {session_id!r}: {e}") from None
    words = sum(c.input_tokens if c.input_tokens is not None else _message_words(c.messages) for c in calls)
    return TraceRequest(t0, words, sum(max(1, c.output_tokens) for c in calls), (), session_id, graph=graph)


def _message_words(messages: tuple[dict, ...] | None) -> int:
    return sum(len(str(m.get("content") or "").split()) for m in messages or ())


def load_sessions(path: str, fmt: str | None,
                  read: dict[str, Callable[[dict, str, int], list[TraceRequest]]]) -> tuple[str, list[TraceRequest]]:
    """The file's sessions, unsorted, and its format (``fmt``, or told from the first object's keys).
    A folder: every ``*.json`` and ``*.jsonl`` file in it, in name order (a capture per session)."""
    files = sorted(os.path.join(path, n) for n in os.listdir(path) if n.endswith((".json", ".jsonl"))) \
        if os.path.isdir(path) else [path]
    if not files:
        raise TraceError(f"{path}: no .json or .jsonl file in the folder")
    entries: list[TraceRequest] = []
    left = MAX_FILE_CHARS
    for file in files:
        text = _read(file, left)
        left -= len(text)
        objects = _objects(text, file)
        if not objects:
            continue
        fmt = fmt or detect(objects[0][1], file, objects[0][0])
        for lineno, obj in objects:
            entries.extend(read[fmt](obj, f"{file}:{lineno}" if lineno else file, len(entries)))
    if not entries or fmt is None:
        raise TraceError(f"{path}: empty trace: no sessions")
    return fmt, entries


def _read(path: str, limit: int) -> str:
    try:
        with open(path, encoding="utf-8-sig") as f:
            text = f.read(limit + 1)
    except OSError as e:
        raise TraceError(f"{path}: cannot read the trace: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise TraceError(f"{path}: not UTF-8 text ({e.reason})") from None
    if len(text) > limit:
        raise TraceError(f"{path}: more than {MAX_FILE_CHARS >> 20} MB of trace: replay a part of it")
    return text


def _objects(text: str, path: str) -> list[tuple[int, dict]]:
    """(line number or 0, object): the whole text as one JSON value, else JSON lines."""
    try:
        whole = json.loads(text)
    except ValueError:
        whole = None
    if isinstance(whole, dict):
        return [(0, whole)]
    if isinstance(whole, list):
        for i, o in enumerate(whole):
            if not isinstance(o, dict):
                raise TraceError(f"{path}: [{i}]: expected a JSON object (a session), got {type(o).__name__}")
        return [(0, o) for o in whole]
    return list(json_lines(text.splitlines(), path, TraceError, "a JSON object (a session)",
                           " (one JSON object, a list, or JSON lines)"))


def detect(obj: dict, path: str, lineno: int = 0) -> str:
    if "requests" in obj and "block_size" in obj:
        return "weka"
    if "spans" in obj:
        return "otel"
    if "conversations" in obj:
        return "sglang"
    where = f"{path}:{lineno}" if lineno else path
    raise TraceError(f"{where}: cannot tell the agentic trace format from keys {sorted(obj)[:12]}: expected Weka "
                     "(id, block_size, requests), OTel spans (spans) or SGLang (conversations); or give format:")


# ---- values (messages name the key path inside the session) ---------------------------------------

def err(name: str, key: str, expected: str, got: Any) -> TraceError:
    return TraceError(f"{name}: {key}: expected {expected}, got {json.dumps(got)[:80]}")


def whole(obj: dict, key: str, name: str, where: str, default: int | None = None) -> int:
    v = obj.get(key, default)
    if v is None:
        raise TraceError(f"{name}: {where}{key}: missing")
    if isinstance(v, bool) or not isinstance(v, int | float) or v < 0 or (isinstance(v, float) and not v.is_integer()):
        raise err(name, where + key, "a whole number >= 0", v)
    return int(v)


def seconds(obj: dict, key: str, name: str, where: str, default: float | None = None) -> float:
    v = obj.get(key, default)
    if v is None:
        raise TraceError(f"{name}: {where}{key}: missing")
    if isinstance(v, bool) or not isinstance(v, int | float) or not v == v or abs(v) == float("inf"):
        raise err(name, where + key, "a number of seconds", v)
    return float(v)


def message_list(v: Any, name: str, key: str) -> tuple[dict, ...]:
    """Chat messages from a list or a JSON string of one (OTel keeps them as a string attribute)."""
    if isinstance(v, str):
        try:
            v = json.loads(v)
        except ValueError:
            raise err(name, key, "a JSON list of messages", v[:60]) from None
    if not isinstance(v, list) or not all(isinstance(m, dict) and "role" in m for m in v):
        raise err(name, key, "a list of messages with a role each", v)
    return tuple(v)
