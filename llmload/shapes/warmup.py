"""The explicit warm-up phase, pure: what the run does for its first ``--warmup-seconds`` (before
any shape's clock starts, or before a plain ``-u``/``-t`` run), and which rows it marks.

A warm-up runs ``--warmup-users N`` users (closed loop), or ``--warmup-rate R`` arrivals per second
for open-loop workloads (with ``--warmup-users`` senders, else as many as the shape uses). It ends
once the users the shape's first stage stops have stopped (:func:`drained`). Every request that
*started* before it ended gets ``phase=warmup`` in PREFIX_requests.csv; the report, the SLO stop
and the capacity search leave those rows out.

Usage::

    plan = parse_warmup("30", "64", "")          # WarmupPlan(seconds=30.0, users=64, rate=None)
    plan.stage(10.0, senders=8, spawn_rate=100)  # (64, 100.0): still warming up
    plan.stage(30.0, senders=8, spawn_rate=100)  # None: over; on to the shape's first stage ...
    drained(users=12, target=4, waited_s=1.0, limit_s=65.0)  # False: ... once its extra users stopped
    after_warmup(95.0, 64, 1.0, run_time=60.0)   # (64, 1.0): a plain run's users, 65 s into its 60
    rows = WarmupRows(); rows.begin(30.0)        # every row written from now is a warm-up row ...
    rows.end(time.time()); rows.stamp(batch)     # ... until a row started after the end
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llmload.files import COL, WARMUP_PHASE

WARMUP = WARMUP_PHASE  # the phase column's value for a warm-up row (empty otherwise)
DEFAULT_SPAWN_RATE = 100.0  # users started per second into the warm-up, unless the shape has its own
DRAIN_SLACK_S = 5.0  # the warm-up's extra users get --stop-timeout plus this long to stop before the shape starts


@dataclass(frozen=True)
class WarmupPlan:
    seconds: float
    users: int | None = None  # closed loop: users during the warm-up
    rate: float | None = None  # open loop: arrivals per second (every process together)

    def stage(self, t: float, senders: int, spawn_rate: float) -> tuple[int, float] | None:
        """(users, spawn rate) at ``t`` seconds into the run; None once the warm-up is over."""
        if t >= self.seconds:
            return None
        return (self.users or max(1, senders)), spawn_rate

    def describe(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "users": self.users, "rate": self.rate}


def positive_option(flag: str, text: Any, what: str) -> float | None:
    """A phase's option (``--warmup-seconds``, ``--isolation-users``, ...): None when not given, else a
    number > 0 (a whole one when ``what`` says "a whole ..."); ValueError naming the flag and ``what``."""
    if text in (None, ""):
        return None
    whole = what.startswith("a whole")
    try:
        value = int(str(text)) if whole else float(str(text))
    except ValueError:
        value = -1
    if not value > 0 or not math.isfinite(value):
        raise ValueError(f"{flag} {text!r}: expected {what}")
    return value


def parse_warmup(seconds: Any, users: Any, rate: Any) -> WarmupPlan | None:
    """The warm-up of ``--warmup-seconds``, ``--warmup-users``, ``--warmup-rate`` (None: none).
    Raises ValueError with a one-line message naming the flag."""
    s = positive_option("--warmup-seconds", seconds, "seconds > 0")
    u = positive_option("--warmup-users", users, "a whole number of users >= 1")
    r = positive_option("--warmup-rate", rate, "requests/s > 0")
    if s is None:
        given = [f for f, v in (("--warmup-users", u), ("--warmup-rate", r)) if v is not None]
        if given:
            raise ValueError(f"{given[0]} needs --warmup-seconds S: how long the warm-up lasts")
        return None
    if u is None and r is None:
        raise ValueError(f"--warmup-seconds {seconds!r}: give --warmup-users N (closed loop) or --warmup-rate R "
                         "(requests/s of open-loop workloads) for the warm-up")
    return WarmupPlan(seconds=s, users=None if u is None else int(u), rate=r)


def drained(users: int, target: int, waited_s: float, limit_s: float) -> bool:
    """Whether the warm-up's extra users have stopped: the run is down to the first stage's
    ``target`` users (or up to it: spawning more needs no wait), or ``limit_s`` has passed."""
    return users <= target or waited_s >= limit_s


def after_warmup(t: float, users: int, spawn_rate: float, run_time: float | None) -> tuple[int, float] | None:
    """A plain ``-u``/``-r``/``-t`` run after its warm-up: ``t`` seconds since the warm-up ended;
    None once ``run_time`` (``-t``, counted from the warm-up's end) is over."""
    if run_time and t >= run_time:
        return None
    return max(0, users), spawn_rate


class WarmupRows:
    """Marks the rows of the warm-up: a row is one when its request started before the warm-up
    ended (while the warm-up runs, every row is). Counts the rows it marked."""

    def __init__(self) -> None:
        self.until: float | None = None  # None: no warm-up; inf: running; else its end (epoch s)
        self.marked = 0
        self.seconds = 0.0

    def begin(self, seconds: float) -> None:
        self.until, self.marked, self.seconds = math.inf, 0, seconds

    def end(self, at: float) -> None:
        if self.until is not None:
            self.until = min(self.until, at)

    def summary(self) -> str:
        """The end-of-run line: how many warm-up requests every verdict left out ("" without a warm-up)."""
        if self.until is None:
            return ""
        return (f"warm-up: {self.marked} request(s) started in the {self.seconds:g}-s warm-up (phase=warmup in "
                "PREFIX_requests.csv): counted in the table above, left out of `llmload report`, the SLO stop "
                "and the search")

    def stamp(self, rows: Sequence[tuple]) -> list[tuple] | Sequence[tuple]:
        """Rows with ``phase=warmup`` where their request started in the warm-up."""
        until = self.until
        if until is None:
            return rows
        start, col = COL.start_time, COL.phase
        out = []
        for row in rows:
            if row[start] < until:
                row = (*row[:col], WARMUP, *row[col + 1:])
                self.marked += 1
            out.append(row)
        return out


def is_warmup(row: tuple) -> bool:
    return row[COL.phase] == WARMUP
