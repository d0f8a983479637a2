"""The warm-up in front of a run: a Locust ``LoadTestShape`` that runs the warm-up
(:class:`llmload.shapes.warmup.WarmupPlan`) for its seconds, then goes to the first stage of the
run's own shape (or, without a shape, the plain run's ``-u`` users at ``-r``). The warm-up ends
once the users that stage stops have stopped (their requests in flight finished, within
``--stop-timeout``): requests queued behind the warm-up's are the warm-up's too. The shape's
clock starts then (a ``4,8,16`` step ladder still gets every step in full; a plain run's ``-t``
counts from then).

The plugin puts it in front of the run's shape at init (``--warmup-seconds``); it tells the run
(:class:`llmload.shapes.control.ShapeControl`) when the warm-up begins and ends, so the rows of
requests started before the end are marked ``phase=warmup``.

Usage::

    environment.shape_class = WarmupShape(environment.shape_class, plan)
"""

from __future__ import annotations

import logging
import time
from typing import Any

from locust import LoadTestShape

from llmload.shapes.control import control_of
from llmload.shapes.warmup import DEFAULT_SPAWN_RATE, DRAIN_SLACK_S, WarmupPlan, after_warmup, drained

log = logging.getLogger("llmload")


class WarmupShape(LoadTestShape):
    def __init__(self, inner: LoadTestShape | None, plan: WarmupPlan) -> None:
        super().__init__()
        self.inner = inner
        self.plan = plan
        self.use_common_options = inner is None  # a plain run: the web UI's form keeps its users and spawn rate
        self._ended_at: float | None = None  # perf_counter at the warm-up's end
        self._first: tuple | None = None  # the shape's first stage, while the warm-up's extra users stop
        self._drain_from = 0.0

    @property
    def runner(self) -> Any:  # Locust sets the runner on the shape it knows: pass it on to the inner one
        return self.__dict__.get("_runner")

    @runner.setter
    def runner(self, value: Any) -> None:
        self.__dict__["_runner"] = value
        if self.inner is not None:
            self.inner.runner = value

    def _control(self) -> Any:
        return control_of(self.runner.environment if self.runner is not None else None)

    def reset_time(self) -> None:  # a test starts: the warm-up first
        super().reset_time()
        self._ended_at, self._first = None, None
        if self.inner is not None:
            self.inner.reset_time()
        control = self._control()
        if control is not None:
            control.warmup_began(self.plan.seconds)

    @property
    def ended(self) -> bool:
        return self._ended_at is not None

    def _senders(self) -> int:
        opts = self.runner.environment.parsed_options if self.runner is not None else None
        users = getattr(self.inner, "users", None)
        return users if isinstance(users, int) else int(getattr(opts, "num_users", 0) or 1)

    def _after(self) -> tuple[int, float] | tuple[int, float, Any] | None:
        """What runs after the warm-up: the shape's tick, or the plain run's -u at -r for -t."""
        if self.inner is not None:
            return self.inner.tick()
        opts = self.runner.environment.parsed_options if self.runner is not None else None
        since = time.perf_counter() - self._ended_at if self._ended_at is not None else 0.0
        users, rate = int(getattr(opts, "num_users", 0) or 1), float(getattr(opts, "spawn_rate", 0) or 1.0)
        return after_warmup(since, users, rate, getattr(opts, "run_time", None))

    def tick(self) -> tuple[int, float] | tuple[int, float, Any] | None:
        if self._ended_at is not None:
            return self._after()
        control = self._control()
        if self._first is None:
            rate = getattr(self.inner, "spawn_rate", None)
            stage = self.plan.stage(self.get_run_time(), self._senders(),
                                    float(rate) if isinstance(rate, int | float) else DEFAULT_SPAWN_RATE)
            if stage is not None:
                if self.plan.rate is not None and control is not None:
                    control.set_arrival_rate(self.plan.rate)
                return stage
            if self.plan.rate is not None and control is not None:
                control.set_arrival_rate(None)  # back to the workloads' own rates, unless the shape sets one
            if self.inner is not None:
                self.inner.reset_time()  # its first stage, at its time 0
            self._first, self._drain_from = self._after(), time.perf_counter()
            if self._first is None:
                self._end(control)
                return None
        env = self.runner.environment if self.runner is not None else None
        users = getattr(self.runner, "user_count", 0) if self.runner is not None else 0
        if not drained(users, self._first[0], time.perf_counter() - self._drain_from,
                       float(getattr(env, "stop_timeout", 0) or 0) + DRAIN_SLACK_S):
            return self._first
        self._end(control)
        return self._after()

    def _end(self, control: Any) -> None:
        self._ended_at = time.perf_counter()
        if control is not None:
            control.warmup_ended(time.time())
        if self.inner is not None:
            self.inner.reset_time()  # the shape's own clock starts now
        log.info("llmload: warm-up over after %.1f s (its extra users stopped); its requests are marked "
                 "phase=warmup and left out of every verdict", self.get_run_time())

    def describe(self) -> dict[str, Any]:
        """The shape after the warm-up, as it describes itself (PREFIX_run.json's ``shape``)."""
        describe = getattr(self.inner, "describe", None)
        return describe() if callable(describe) else {}
