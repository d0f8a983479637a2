"""``--isolation``, pure: the phase plan (each priority class alone, then every class together) and
the phase marks of the rows.

A run of ``--isolation`` has one phase per priority class, most urgent first (by its ``rank``),
in which only that class's users run, then a ``together`` phase in which every class runs. The
``together`` phase runs ``--isolation-users`` users, split over the priority classes by their
Locust weights (largest remainder, at least one user each), and each class's share over its user
classes the same way; a class alone runs exactly the users it has in ``together``, user class by user
class (the shape tells Locust each one's count), so the only thing that changes between its two
phases is the other classes' traffic. Each phase lasts
``--isolation-seconds`` from the moment its users are started; before it, the previous phase's
users are stopped (their requests in flight end as ``cancelled``), so no phase overlaps another.

Every request row gets its phase in the ``phase`` column: ``alone:CLASS`` or ``together`` (the
warm-up's rows keep ``warmup``). The report compares each class alone with together
(:mod:`llmload.report.isolation`).

Usage::

    plan = parse_isolation(True, "20", "16", "")        # IsolationPlan(seconds=20.0, users=16, ...)
    groups = [ClassGroup("high", 0, ("HighUser",), 1), ClassGroup("low", 10, ("LowUser",), 3)]
    phase_plan(plan, groups)
    # [Phase("alone:high", 4, ("HighUser",), (4,)), Phase("alone:low", 12, ("LowUser",), (12,)),
    #  Phase("together", 16, ("HighUser", "LowUser"), (4, 12))]
    marks = PhaseMarks(); marks.begin("alone:high", time.time()); marks.stamp(rows)
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from llmload.files import ALONE_PHASE_PREFIX, COL, TOGETHER_PHASE
from llmload.shapes.warmup import positive_option

ALONE_PREFIX = ALONE_PHASE_PREFIX  # the phase of a class running alone: alone:CLASS
TOGETHER = TOGETHER_PHASE  # the phase of every class at once
DEFAULT_SECONDS = 30.0
DEFAULT_SPAWN_RATE = 100.0  # users started per second when a phase begins
DRAIN_LIMIT_S = 30.0  # at most this long waiting for the previous phase's users to stop (beyond --stop-timeout)


def alone(name: str) -> str:
    """The phase label of class ``name`` running alone."""
    return ALONE_PREFIX + name


def class_of_phase(phase: str) -> str | None:
    """``alone:high`` → ``high``; None for ``together`` or anything else."""
    return phase[len(ALONE_PREFIX):] if isinstance(phase, str) and phase.startswith(ALONE_PREFIX) else None


@dataclass(frozen=True)
class IsolationPlan:
    seconds: float = DEFAULT_SECONDS  # each phase
    users: int = 0  # the together phase's users (0: -u, the run's user count)
    spawn_rate: float = DEFAULT_SPAWN_RATE

    def describe(self) -> dict[str, Any]:
        return {"seconds": self.seconds, "users": self.users, "spawn_rate": self.spawn_rate}


@dataclass(frozen=True)
class ClassGroup:
    """A priority class and the Locust user classes whose workloads are of it."""

    name: str
    rank: float  # 0 the most urgent (the workloads' priority.rank: the lowest of them)
    user_classes: tuple[str, ...]
    weight: float  # the sum of the user classes' Locust weights
    weights: tuple[float, ...] = ()  # each user class's weight (empty: equal shares)


@dataclass(frozen=True)
class Phase:
    label: str
    users: int
    user_classes: tuple[str, ...]
    counts: tuple[int, ...] = ()  # the users of each of user_classes (they sum to users)


def split(total: int, weights: Sequence[float], at_least: int = 0) -> list[int]:
    """``total`` split in proportion to ``weights`` by largest remainder (ties: the first), each share
    at least ``at_least``: the shares sum to ``total`` (given ``total >= at_least * len(weights)``)."""
    whole = sum(weights)
    quotas = [total * w / whole if whole > 0 else total / len(weights) for w in weights]
    counts = [max(at_least, math.floor(q)) for q in quotas]
    while sum(counts) < total:  # one more to the share furthest below its quota
        counts[min(range(len(counts)), key=lambda i: (counts[i] - quotas[i], i))] += 1
    while sum(counts) > total:  # the at_least floor over-allocated: one less from the furthest above
        over = [i for i in range(len(counts)) if counts[i] > at_least]
        counts[max(over, key=lambda i: (counts[i] - quotas[i], -i))] -= 1
    return counts


def parse_isolation(enabled: Any, seconds: Any, users: Any, spawn_rate: Any) -> IsolationPlan | None:
    """The plan of ``--isolation`` with ``--isolation-seconds``, ``--isolation-users`` and
    ``--isolation-spawn-rate`` (None: no isolation run). Raises ValueError naming the flag."""
    s = positive_option("--isolation-seconds", seconds, "seconds > 0")
    u = positive_option("--isolation-users", users, "a whole number >= 1")
    r = positive_option("--isolation-spawn-rate", spawn_rate, "seconds > 0")
    if not enabled:
        given = [f for f, v in (("--isolation-seconds", s), ("--isolation-users", u),
                                ("--isolation-spawn-rate", r)) if v is not None]
        if given:
            raise ValueError(f"{given[0]} needs --isolation: it sets a phase of the isolation run")
        return None
    return IsolationPlan(seconds=s or DEFAULT_SECONDS, users=int(u or 0), spawn_rate=r or DEFAULT_SPAWN_RATE)


def phase_plan(plan: IsolationPlan, groups: Sequence[ClassGroup], run_users: int = 0) -> list[Phase]:
    """Each class alone (most urgent first), then together. ``run_users``: -u, when the plan has no users."""
    if len(groups) < 2:
        raise ValueError(f"--isolation needs at least two priority classes; the run has "
                         f"{', '.join(g.name for g in groups) or 'none'} (priority: in each workload)")
    total = plan.users or run_users
    ordered = sorted(groups, key=lambda g: (g.rank, g.name))
    if total < len(ordered):
        raise ValueError(f"--isolation-users {total}: expected at least one user per class ({len(ordered)})")
    phases = []
    for g, users in zip(ordered, split(total, [g.weight for g in ordered], at_least=1), strict=True):
        counts = split(users, g.weights or [1.0] * len(g.user_classes))
        phases.append(Phase(alone(g.name), users, g.user_classes, tuple(counts)))
    everyone = sorted((c, n) for p in phases for c, n in zip(p.user_classes, p.counts, strict=True))
    return [*phases, Phase(TOGETHER, total, tuple(c for c, _ in everyone), tuple(n for _, n in everyone))]


class PhaseMarks:
    """Marks each row with the phase its request started in (rows already marked, the warm-up's,
    keep theirs). The shape tells it when each phase began (epoch seconds). Never cleared: a new
    test's first phase begins before any of its users start, so no row of it can fall under an
    earlier test's phase."""

    def __init__(self) -> None:
        self.starts: list[float] = []
        self.labels: list[str] = []

    def begin(self, label: str, at: float) -> None:
        if self.starts and at < self.starts[-1]:
            at = self.starts[-1]
        self.starts.append(at)
        self.labels.append(label)

    def stamp(self, rows: Sequence[tuple]) -> Sequence[tuple]:
        if not self.starts:
            return rows
        start, col, starts, labels = COL.start_time, COL.phase, self.starts, self.labels
        out = []
        for row in rows:
            i = bisect.bisect_right(starts, row[start]) - 1
            if i >= 0 and not row[col]:
                row = (*row[:col], labels[i], *row[col + 1:])
            out.append(row)
        return out
