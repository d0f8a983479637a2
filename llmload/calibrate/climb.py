"""Where to measure next: bracket the limit, bisect it, confirm it. Pure.

1. **Bracket**: the stream counts of the plan (doubling by default), lowest first, until one fails.
2. **Bisect** between the last that passed and the first that failed, with the capacity search's
   :class:`~llmload.shapes.search.Bisection`, to a precision of 1/8 of the bracket's low end (at
   least one stream): the limit is then known to ~12 %, inside the run-to-run noise.
3. **Confirm**: the limit is measured once more. When the confirmation fails, the highest level
   below it that passed is confirmed instead (at most ``MAX_FALLBACKS`` times), so the limit
   printed is one that passed twice; a confirmation that failed through the mock or the machine
   leaves the limit, not confirmed.

A failed step that says nothing about the client (the mock could not go faster, other processes
kept the client's cores busy) ends the bracket: the limit is then a lower bound.

Usage::

    climb = Climb([32, 64, 128, 256])
    while (streams := climb.next_level()) is not None:
        step = measure(streams)
        climb.record(step["ok"], cause_of(step))   # "client", "mock" or "machine"
    climb.limit, climb.limit_found, climb.limited_by, climb.confirmed
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmload.shapes.search import Bisection

PRECISION_SHARE = 0.125
MAX_FALLBACKS = 2


@dataclass
class Level:
    streams: int
    kind: str  # "bracket", "probe", "end", "confirm"
    ok: bool


class Climb:
    """The calibration's plan: call :meth:`next_level`, measure it, :meth:`record` the verdict."""

    def __init__(self, plan: list[int]) -> None:
        self.plan = sorted({int(n) for n in plan if n > 0})
        if not self.plan:
            raise ValueError("--streams: expected at least one stream count > 0")
        self.history: list[Level] = []
        self.limit = 0  # the highest stream count that passed (0: none)
        self.limit_found = False  # a level above the limit failed through the client's fault
        self.limited_by = "highest step"  # "client", "mock", "machine" or "highest step"
        self.confirmed: bool | None = None
        self._index = 0
        self._bisection: Bisection | None = None
        self._fallbacks = 0
        self._next: tuple[int, str] | None = None
        self._done = False

    def _probing(self) -> bool:
        b = self._bisection
        return b is not None and b.hi - b.lo > b.precision

    def next_level(self) -> int | None:
        """The stream count to measure next; None when the calibration is over."""
        if self._done:
            return None
        measured = {x.streams for x in self.history}
        if self._bisection is None and self._index < len(self.plan):
            self._next = (self.plan[self._index], "bracket")
        elif self._probing():
            assert self._bisection is not None
            self._next = (int(self._bisection.next_level() or 0), "probe")
        elif self.limit == 0 and self._bisection is not None and int(self._bisection.lo) not in measured:
            self._next = (int(self._bisection.lo), "end")  # nothing passed yet: the lowest level
        elif self.limit > 0 and self.confirmed is None:
            self._next = (self.limit, "confirm")
        else:
            self._done = True
            return None
        return self._next[0]

    @property
    def next_kind(self) -> str:
        """What the level :meth:`next_level` gave is for: "bracket", "probe", "end" or "confirm"."""
        return self._next[1] if self._next else ""

    def record(self, ok: bool, cause: str = "client") -> None:
        """The verdict on the level :meth:`next_level` gave; ``cause`` of a failure: "client" (it lost
        the tolerances), "mock" or "machine" (the step says nothing about the client)."""
        if self._next is None:
            raise RuntimeError("record() without next_level()")
        streams, kind = self._next
        self._next = None
        self.history.append(Level(streams, kind, ok))
        if kind == "confirm":
            self._confirmed(ok, cause)
            return
        if ok:
            self.limit = max(self.limit, streams)
        if kind == "probe":
            assert self._bisection is not None
            self._bisection.record(ok)
        elif kind == "bracket":
            self._index += 1
            if ok:
                return
            if cause != "client":
                self.limited_by = cause
                self._index = len(self.plan)  # the rest would say nothing more about the client
                return
            self.limit_found, self.limited_by = True, "client"
            lo = self.limit if self.limit > 0 else 1
            if streams - lo > 1:
                self._bisection = Bisection(lo, streams, max(1, round(lo * PRECISION_SHARE)), integer=True)
            self._index = len(self.plan)

    def _confirmed(self, ok: bool, cause: str = "client") -> None:
        if ok:
            self.confirmed = True
            self._done = True
            return
        below = [x.streams for x in self.history if x.ok and x.streams < self.limit]
        # a confirmation the mock or the machine failed says nothing about the client: not confirmed
        if below and self._fallbacks < MAX_FALLBACKS and cause == "client":
            self._fallbacks += 1
            self.limit = max(below)
            self.confirmed = None  # confirm the next one down
            return
        self.confirmed = False
        self._done = True

    def describe(self) -> dict[str, Any]:
        return {"limit": self.limit, "limit_found": self.limit_found, "limited_by": self.limited_by,
                "confirmed": self.confirmed,
                "levels": [{"streams": x.streams, "kind": x.kind, "ok": x.ok} for x in self.history]}
