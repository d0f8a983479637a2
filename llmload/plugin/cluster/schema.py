"""Shapes a payload from another process must have before any of it is used. Pure, no I/O.

A value that crossed a process (Locust's ZeroMQ channel, msgpack) can be anything msgpack
carries: any type in any place, integers up to 2**64, NaN and infinities, strings of gigabytes.
Each check below takes the value or raises :class:`Invalid` naming where it went wrong and how;
:class:`Record` takes a mapping with exactly its fields (a missing or an extra one is refused).
The schemas themselves are declared once, in :mod:`llmload.plugin.cluster.messages`.

Usage::

    ROW = Record({"t": Num(lo=0), "n": Int(0, 10_000_000), "label": Opt(Text(64))})
    ROW.check({"t": 1.5, "n": 3, "label": None})     # returns; a bad value raises Invalid
    try:
        ROW.check({"t": float("nan"), "n": 3, "label": None})
    except Invalid as e:
        str(e)   # 't: expected a finite number >= 0, got nan'
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

_SHOWN = 40  # characters of a refused value quoted in the reason


class Invalid(ValueError):
    """A value that does not have its schema's shape: ``where`` (a path) and ``what`` was wrong."""

    def __init__(self, what: str, where: tuple[str, ...] = ()) -> None:
        super().__init__(what)
        self.what = what
        self.where = where

    def inside(self, step: str) -> Invalid:
        return Invalid(self.what, (step, *self.where))

    def __str__(self) -> str:
        path = "".join(s if s.startswith("[") else f".{s}" for s in self.where).lstrip(".")
        return f"{path}: {self.what}" if path else self.what


def shown(value: Any) -> str:
    """A refused value, short enough for one log line (a 64 MiB string is not quoted whole)."""
    if isinstance(value, str | bytes) and len(value) > _SHOWN:
        return f"{type(value).__name__} of {len(value):,} characters"
    if isinstance(value, list | tuple | dict):
        return f"{type(value).__name__} of {len(value):,} items"
    text = repr(value)
    return text if len(text) <= _SHOWN else text[:_SHOWN] + "…"


class Check:
    """One value's shape; ``check`` returns or raises Invalid."""

    def check(self, value: Any) -> None:
        raise NotImplementedError


class Int(Check):
    """A whole number (not a bool) in ``lo..hi``."""

    def __init__(self, lo: int, hi: int) -> None:
        self.lo, self.hi = lo, hi

    def check(self, value: Any) -> None:
        if type(value) is not int or not self.lo <= value <= self.hi:
            raise Invalid(f"expected a whole number {self.lo}..{self.hi}, got {shown(value)}")


class Num(Check):
    """A finite number (int or float, not a bool) in ``lo..hi``."""

    def __init__(self, lo: float = -1e18, hi: float = 1e18) -> None:
        self.lo, self.hi = lo, hi

    def check(self, value: Any) -> None:
        kind = type(value)
        if (kind is not float and kind is not int) or not self.lo <= value <= self.hi:
            # NaN fails every comparison, so it lands here too
            bound = f">= {self.lo:g}" if self.hi >= 1e18 else f"in {self.lo:g}..{self.hi:g}"
            raise Invalid(f"expected a finite number {bound}, got {shown(value)}")


class Text(Check):
    """A string of at most ``max_len`` characters (optionally one of ``choices``)."""

    def __init__(self, max_len: int, choices: Iterable[str] | None = None) -> None:
        self.max_len = max_len
        self.choices = frozenset(choices) if choices is not None else None

    def check(self, value: Any) -> None:
        if type(value) is not str:
            raise Invalid(f"expected text, got {shown(value)}")
        if len(value) > self.max_len:
            raise Invalid(f"text of {len(value):,} characters, over the {self.max_len:,} allowed")
        if self.choices is not None and value not in self.choices:
            raise Invalid(f"expected one of {', '.join(sorted(self.choices))}, got {shown(value)}")


class Flag(Check):
    def check(self, value: Any) -> None:
        if type(value) is not bool:
            raise Invalid(f"expected true or false, got {shown(value)}")


class Nothing(Check):
    """The payload of a message that carries none."""

    def check(self, value: Any) -> None:
        if value is not None:
            raise Invalid(f"expected no payload, got {shown(value)}")


class Opt(Check):
    """``inner`` or None."""

    def __init__(self, inner: Check) -> None:
        self.inner = inner

    def check(self, value: Any) -> None:
        if value is not None:
            self.inner.check(value)


class Seq(Check):
    """A list (msgpack's array) of at most ``max_len`` items, each ``item``."""

    def __init__(self, item: Check, max_len: int) -> None:
        self.item, self.max_len = item, max_len

    def check(self, value: Any) -> None:
        if type(value) is not list and type(value) is not tuple:
            raise Invalid(f"expected a list, got {shown(value)}")
        if len(value) > self.max_len:
            raise Invalid(f"a list of {len(value):,} items, over the {self.max_len:,} allowed")
        item = self.item.check
        for i, v in enumerate(value):
            try:
                item(v)
            except Invalid as e:
                raise e.inside(f"[{i}]") from None


class Cells(Check):
    """A fixed-length list, one check per position (a row of a table); ``names`` name the positions."""

    def __init__(self, cells: Iterable[Check], names: Iterable[str]) -> None:
        self.cells = tuple(c.check for c in cells)
        self.names = tuple(names)

    def check(self, value: Any) -> None:
        if type(value) is not list and type(value) is not tuple:
            raise Invalid(f"expected a list, got {shown(value)}")
        if len(value) != len(self.cells):
            raise Invalid(f"{len(value)} values, expected {len(self.cells)}")
        # zip and a plain loop: rows are the one value checked thousands of times a second
        for i, (check, v) in enumerate(zip(self.cells, value)):  # noqa: B905 - lengths equal above
            try:
                check(v)
            except Invalid as e:
                raise e.inside(self.names[i]) from None


class Map(Check):
    """A mapping of at most ``max_len`` entries, each key ``key`` and each value ``value``."""

    def __init__(self, key: Check, value: Check, max_len: int) -> None:
        self.key, self.value, self.max_len = key, value, max_len

    def check(self, value: Any) -> None:
        if type(value) is not dict:
            raise Invalid(f"expected a mapping, got {shown(value)}")
        if len(value) > self.max_len:
            raise Invalid(f"a mapping of {len(value):,} entries, over the {self.max_len:,} allowed")
        for k, v in value.items():
            try:
                self.key.check(k)
            except Invalid as e:
                raise Invalid(f"key {shown(k)}: {e.what}") from None
            try:
                self.value.check(v)
            except Invalid as e:
                raise e.inside(str(k)[:_SHOWN]) from None


class Record(Check):
    """A mapping with exactly ``fields`` (and any of ``optional``); ``also(value)`` checks what
    spans fields (raises Invalid) once each field has its shape."""

    def __init__(self, fields: dict[str, Check], optional: dict[str, Check] | None = None,
                 also: Callable[[dict[str, Any]], None] | None = None, open_ended: bool = False) -> None:
        self.fields = fields
        self.optional = optional or {}
        self.also = also
        self.open_ended = open_ended  # other keys are let through unchecked (another program's mapping)

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(self.fields)

    def check(self, value: Any) -> None:
        if type(value) is not dict:
            raise Invalid(f"expected a mapping, got {shown(value)}")
        for name, check in self.fields.items():
            if name not in value:
                raise Invalid(f"missing field {name!r}")
            try:
                check.check(value[name])
            except Invalid as e:
                raise e.inside(name) from None
        if len(value) != len(self.fields):
            extra = [k for k in value if k not in self.fields and k not in self.optional]
            if extra and not self.open_ended:
                raise Invalid(f"unknown field {shown(extra[0])}")
            for name, check in self.optional.items():
                if name in value:
                    try:
                        check.check(value[name])
                    except Invalid as e:
                        raise e.inside(name) from None
        if self.also is not None:
            self.also(value)


class Keyed(Check):
    """One of two shapes, told apart by whether a mapping has ``key``."""

    def __init__(self, key: str, with_key: Check, without: Check) -> None:
        self.key, self.with_key, self.without = key, with_key, without

    @property
    def names(self) -> tuple[str, ...]:
        return getattr(self.without, "names", ())

    def check(self, value: Any) -> None:
        (self.with_key if type(value) is dict and self.key in value else self.without).check(value)


class Either(Check):
    """Any of ``choices`` (the first one's reason when none fits)."""

    def __init__(self, *choices: Check) -> None:
        self.choices = choices

    def check(self, value: Any) -> None:
        first: Invalid | None = None
        for c in self.choices:
            try:
                c.check(value)
                return
            except Invalid as e:
                first = first or e
        assert first is not None
        raise first
