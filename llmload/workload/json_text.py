"""JSON from a user's file (a dataset, a trace), one value or one object at a time, with errors that
name the file and the line: ``trace.jsonl:12: not valid JSON: ...``, ``...: expected a JSON object,
got list``. Pure.

Usage::

    obj = json_object(line, f"{path}:{lineno}", TraceError)                 # raises TraceError
    value = json_value(line, f"{path}:{lineno}", ScenarioError)             # any JSON value
    for lineno, obj in json_lines(lines, path, TraceError):                  # JSON lines, blank ones skipped
        ...
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import Any


def json_value(text: str, where: str, error: type[Exception], hint: str = "") -> Any:
    """``text`` parsed; ``error("WHERE: not valid JSON{hint}: ...")`` when it is not JSON."""
    try:
        return json.loads(text)
    except ValueError as e:
        raise error(f"{where}: not valid JSON{hint}: {e}") from None


def json_object(text: str, where: str, error: type[Exception], what: str = "a JSON object", hint: str = "") -> dict:
    """``text`` parsed, which must be an object; ``error`` naming ``where`` otherwise."""
    obj = json_value(text, where, error, hint)
    if not isinstance(obj, dict):
        raise error(f"{where}: expected {what}, got {type(obj).__name__}")
    return obj


def json_lines(lines: Iterable[str], name: str, error: type[Exception], what: str = "a JSON object",
               hint: str = "") -> Iterator[tuple[int, dict]]:
    """Each non-blank line's object, with its line number (``NAME:LINE`` in an error)."""
    for lineno, line in enumerate(lines, 1):
        text = line.strip()
        if text:
            yield lineno, json_object(text, f"{name}:{lineno}", error, what, hint)
