"""The ``--isolation`` run as a Locust ``LoadTestShape``: each priority class alone, then together
(the plan is :func:`llmload.shapes.isolation.phase_plan`).

Each phase's tick names its user classes (Locust's ``tick() -> (users, spawn_rate, user_classes)``).
Between two phases the shape first asks for 0 users and waits until they have stopped (within
``--stop-timeout`` plus :data:`~llmload.shapes.isolation.DRAIN_LIMIT_S`): Locust's dispatcher does not
swap one class's users for another's at an unchanged count, and a phase must not overlap the next.
The phase's clock starts when its users are asked for; the run (:class:`llmload.shapes.control.ShapeControl`)
is told then, so each row is marked with its phase.

Each phase's users are exactly the plan's, user class by user class: Locust's dispatcher splits a count
over weighted classes in its own order (``locust/dispatch.py`` ``_kl_generator``), which need not give a
class alone what it gets together, so the shape sets each of the phase's user classes' ``fixed_count``
(which the dispatcher spawns first, exactly) to the plan's count before the tick that asks for them; the
classes' own ``fixed_count`` is put back when the run ends.

The plugin installs it at init for ``--isolation`` (a locustfile's own shape cannot run beside it).

Usage::

    environment.shape_class = IsolationShape(plan, groups, {c.__name__: c for c in environment.user_classes})
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from locust import LoadTestShape

from llmload.shapes.control import control_of
from llmload.shapes.isolation import DRAIN_LIMIT_S, ClassGroup, IsolationPlan, Phase, phase_plan

log = logging.getLogger("llmload")


class IsolationShape(LoadTestShape):
    abstract = True  # never picked from a locustfile's namespace (it needs its plan): the plugin installs it

    def __init__(self, plan: IsolationPlan, groups: Sequence[ClassGroup], classes: dict[str, type],
                 run_users: int = 0) -> None:
        super().__init__()
        self.plan = plan
        self.groups = tuple(groups)
        self.phases: list[Phase] = phase_plan(plan, groups, run_users)
        self.users = self.phases[-1].users  # what a warm-up in front sizes itself by
        self.spawn_rate = plan.spawn_rate
        self._classes = classes
        self._own_fixed = {name: getattr(cls, "fixed_count", 0) for name, cls in classes.items()}
        self._started: list[float | None] = [None] * len(self.phases)  # epoch seconds each phase began
        self._reset()

    def _reset(self) -> None:
        self._index = 0
        self._phase_from: float | None = None  # perf_counter at the current phase's start
        self._drain_from: float | None = None
        self._started = [None] * len(self.phases)

    def reset_time(self) -> None:
        super().reset_time()
        self._restore()
        self._reset()

    def _user_classes(self, phase: Phase) -> list[type]:
        """The phase's user classes, each told its count (Locust spawns ``fixed_count`` users of it)."""
        out = []
        for name, count in zip(phase.user_classes, phase.counts, strict=True):
            if count > 0:
                self._classes[name].fixed_count = count
                out.append(self._classes[name])
        return out

    def _restore(self) -> None:
        for name, fixed in self._own_fixed.items():
            if getattr(self._classes[name], "fixed_count", 0) != fixed:
                self._classes[name].fixed_count = fixed

    def tick(self) -> tuple[int, float] | tuple[int, float, list[type]] | None:
        while self._index < len(self.phases):
            phase = self.phases[self._index]
            now = time.perf_counter()
            if self._phase_from is None:
                if not self._drained(now):
                    return 0, self.plan.spawn_rate
                self._phase_from = now
                self._started[self._index] = time.time()
                control = control_of(self.runner.environment if self.runner is not None else None)
                if control is not None:
                    control.phase_began(phase.label, self._started[self._index])
                log.info("llmload: isolation phase %s: %d user(s) for %g s", phase.label, phase.users,
                         self.plan.seconds)
            if now - self._phase_from < self.plan.seconds:
                return phase.users, self.plan.spawn_rate, self._user_classes(phase)
            self._index += 1
            self._phase_from = self._drain_from = None
        self._restore()
        return None

    def _drained(self, now: float) -> bool:
        users = getattr(self.runner, "user_count", 0) if self.runner is not None else 0
        if users == 0:
            return True
        if self._drain_from is None:
            self._drain_from = now
        env = self.runner.environment if self.runner is not None else None
        limit = float(getattr(env, "stop_timeout", 0) or 0) + DRAIN_LIMIT_S
        return now - self._drain_from >= limit

    def describe(self) -> dict[str, Any]:
        """PREFIX_run.json's ``shape``: the plan, the classes by urgency, and when each phase began."""
        return {"isolation": {
            **self.plan.describe(),
            "classes": [{"class": g.name, "rank": g.rank, "user_classes": list(g.user_classes)}
                        for g in sorted(self.groups, key=lambda g: (g.rank, g.name))],
            "phases": [{"phase": p.label, "users": p.users, "user_classes": list(p.user_classes),
                        "counts": list(p.counts),
                        "started_at": None if t is None else round(t, 6)}
                       for p, t in zip(self.phases, self._started, strict=True)],
        }}
