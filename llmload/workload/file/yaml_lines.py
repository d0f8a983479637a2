"""YAML that remembers where each key was, and the checks that turn a value into an error naming
``file:line: key.path: what was expected`` (with a "did you mean" for a mistyped key).

Usage::

    raw, ctx = compose("workloads: {chat: {weigth: 2}}", "s.yaml")
    keys(ctx, raw["workloads"]["chat"], "workloads.chat", {"weight"})
    # ScenarioError: s.yaml:1: workloads.chat.weigth: unknown key; did you mean weight? (known: weight)
"""

from __future__ import annotations

import difflib
import math
import os
from typing import Any

import yaml

from llmload.workload.file.spec import ScenarioError

MAX_BYTES = 4 << 20  # a scenario file is a page of YAML, not a data set
MAX_NODES = 100_000  # values after aliases are expanded: an alias bomb ("billion laughs") stops here
MAX_DEPTH = 50
MAX_NUMBER = 10**15
MAX_TOKENS = 10_000_000  # the longest length a scenario may ask for (prompt, output, prefix)
MAX_PREFIXES = 100_000


class _Budget:
    def __init__(self) -> None:
        self.nodes = 0


def _to_python(node: yaml.Node, path: str, lines: dict[str, int], budget: _Budget, depth: int = 0) -> Any:
    lines.setdefault(path, node.start_mark.line + 1)
    budget.nodes += 1
    if budget.nodes > MAX_NODES:
        raise _Hostile(node, f"more than {MAX_NODES:,} values once aliases are expanded (an alias bomb?); "
                             "write the values out, or use fewer aliases")
    if depth > MAX_DEPTH:
        raise _Hostile(node, f"nested more than {MAX_DEPTH} levels deep")
    if isinstance(node, yaml.MappingNode):
        out: dict[str, Any] = {}
        for k, v in node.value:
            key = str(k.value) if isinstance(k, yaml.ScalarNode) else str(_to_python(k, path, {}, budget, depth + 1))
            sub = f"{path}.{key}" if path else key
            lines[sub] = k.start_mark.line + 1
            out[key] = _to_python(v, sub, lines, budget, depth + 1)
        return out
    if isinstance(node, yaml.SequenceNode):
        return [_to_python(v, f"{path}[{i}]", lines, budget, depth + 1) for i, v in enumerate(node.value)]
    value = yaml.constructor.SafeConstructor().construct_object(node, deep=True)
    if isinstance(value, int | float) and not isinstance(value, bool) and not (
            math.isfinite(value) and abs(value) <= MAX_NUMBER):
        raise _Hostile(node, f"{value!r} is not a usable number (at most {MAX_NUMBER:.0e})", path)
    return value


class _Hostile(Exception):
    def __init__(self, node: yaml.Node, message: str, path: str = "") -> None:
        super().__init__(message)
        self.line = node.start_mark.line + 1
        self.message = message
        self.path = path


class Ctx:
    """Where errors point: the file and the line of every key path."""

    def __init__(self, path: str, lines: dict[str, int]) -> None:
        self.path = path
        self.lines = lines

    def error(self, key_path: str, message: str) -> ScenarioError:
        line = None
        p = key_path
        while p:
            if p in self.lines:
                line = self.lines[p]
                break
            p = p.rsplit(".", 1)[0] if "." in p else ""
        where = f"{self.path}:{line}" if line else self.path
        return ScenarioError(one_line(f"{where}: {key_path}: {message}"))


_CONTROLS = {c: f"\\x{c:02x}" for c in range(32)} | {10: "\\n", 13: "\\r", 9: "\\t", 127: "\\x7f"}


def one_line(text: str) -> str:
    """An error as one line: a key may hold a newline or a tab (a quoted YAML key can), shown escaped."""
    return text.translate(_CONTROLS)


def compose(text: str, path: str) -> tuple[Any, Ctx]:
    """Parse YAML text into plain Python values plus the line of each key path."""
    lines: dict[str, int] = {}
    if len(text) > MAX_BYTES:
        raise ScenarioError(f"{path}: {len(text):,} characters is too large for a scenario file (at most "
                            f"{MAX_BYTES:,}); put prompts in a dataset: file")
    try:
        node = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as e:
        mark = getattr(e, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else path
        raise ScenarioError(f"{where}: not valid YAML: {getattr(e, 'problem', e)}") from None
    except RecursionError:
        raise ScenarioError(f"{path}: nested too deeply to read (at most {MAX_DEPTH} levels)") \
            from None
    if node is None:
        raise ScenarioError(f"{path}: the file is empty; expected a mapping with workloads:")
    try:
        return _to_python(node, "", lines, _Budget()), Ctx(path, lines)
    except _Hostile as e:
        where = f"{e.path}: " if e.path else ""
        raise ScenarioError(one_line(f"{path}:{e.line}: {where}{e.message}")) from None
    except RecursionError:
        raise ScenarioError(f"{path}: nested too deeply to read (at most {MAX_DEPTH} levels)") from None


def keys(ctx: Ctx, d: Any, path: str, known: set[str]) -> dict:
    """``d`` must be a mapping whose keys are all ``known``."""
    if not isinstance(d, dict):
        raise ctx.error(path, f"expected a mapping, got {type(d).__name__}")
    for k in d:
        if k not in known:
            close = difflib.get_close_matches(k, sorted(known), n=1, cutoff=0.6)
            hint = f"did you mean {close[0]}? " if close else ""
            raise ctx.error(f"{path}.{k}" if path else k, f"unknown key; {hint}(known: {', '.join(sorted(known))})")
    return d


def whole(ctx: Ctx, d: dict, key: str, path: str, default: Any = None, minimum: int = 1,
          maximum: int = MAX_NUMBER) -> Any:
    """A whole number in [``minimum``, ``maximum``] (booleans are not numbers here)."""
    if key not in d:
        return default
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, int) or v < minimum:
        raise ctx.error(f"{path}.{key}" if path else key, f"expected a whole number >= {minimum}, got {v!r}")
    if v > maximum:
        raise ctx.error(f"{path}.{key}" if path else key, f"{v} is too large: expected at most {maximum:,}")
    return v


def number(ctx: Ctx, d: dict, key: str, path: str, default: Any = None, minimum: float = 0.0,
           strict: bool = False) -> Any:
    """A number >= ``minimum`` (> with ``strict``), as float."""
    if key not in d:
        return default
    v = d[key]
    if isinstance(v, bool) or not isinstance(v, int | float) or math.isnan(v) or v < minimum or (
            strict and v <= minimum):
        bound = f"> {minimum:g}" if strict else f">= {minimum:g}"
        raise ctx.error(f"{path}.{key}" if path else key, f"expected a number {bound}, got {v!r}")
    return float(v)


def choice(ctx: Ctx, d: dict, key: str, path: str, options: tuple[str, ...], default: str) -> str:
    v = d.get(key, default)
    if v not in options:
        raise ctx.error(f"{path}.{key}" if path else key, f"expected {' or '.join(options)}, got {v!r}")
    return v


def file_section(ctx: Ctx, raw: Any, path: str, base_dir: str, allowed: set[str],
                 what: str) -> tuple[dict[str, Any], str]:
    """``KEY: FILE`` or ``KEY: {path: FILE, ...}``: the section's mapping and the file's path
    (relative to the scenario file's folder), or an error at ``path`` if it is missing."""
    d = keys(ctx, {"path": raw} if isinstance(raw, str) else raw, path, allowed)
    if not isinstance(d.get("path"), str):
        raise ctx.error(f"{path}.path", f"missing: the {what} file, relative to the scenario file")
    full = d["path"] if os.path.isabs(d["path"]) else os.path.join(base_dir, d["path"])
    if not os.path.exists(full):
        raise ctx.error(f"{path}.path", f"no such file {full}")
    return d, full
