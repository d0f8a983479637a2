"""The warm-up in front of a run: a Locust ``LoadTestShape`` that runs the warm-up
(:class:`llmload.shapes.warmup.WarmupPlan`) for its seconds, then hands over to the run's own
shape with that shape's clock started at the warm-up's end (a ``4,8,16`` step ladder still gets
every step in full), or, without a shape, holds the plain run's ``-u`` users at ``-r`` for ``-t``
(counted from the warm-up's end).

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
from llmload.shapes.warmup import DEFAULT_SPAWN_RATE, WarmupPlan, after_warmup

log = logging.getLogger("llmload")


class WarmupShape(LoadTestShape):
    def __init__(self, inner: LoadTestShape | None, plan: WarmupPlan) -> None:
        super().__init__()
        self.inner = inner
        self.plan = plan
        self.use_common_options = inner is None  # a plain run: the web UI's form keeps its users and spawn rate
        self._ended_at: float | None = None  # perf_counter at the warm-up's end

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
        self._ended_at = None
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

    def tick(self) -> tuple[int, float] | tuple[int, float, Any] | None:
        if self._ended_at is None:
            rate = getattr(self.inner, "spawn_rate", None)
            stage = self.plan.stage(self.get_run_time(), self._senders(),
                                    float(rate) if isinstance(rate, int | float) else DEFAULT_SPAWN_RATE)
            control = self._control()
            if stage is not None:
                if self.plan.rate is not None and control is not None:
                    control.set_arrival_rate(self.plan.rate)
                return stage
            self._end(control)
        if self.inner is not None:
            return self.inner.tick()
        opts = self.runner.environment.parsed_options if self.runner is not None else None
        return after_warmup(time.perf_counter() - (self._ended_at or 0.0), int(getattr(opts, "num_users", 0) or 1),
                            float(getattr(opts, "spawn_rate", 0) or 1.0), getattr(opts, "run_time", None))

    def _end(self, control: Any) -> None:
        self._ended_at = time.perf_counter()
        if control is not None:
            control.warmup_ended(time.time())
            if self.plan.rate is not None:
                control.set_arrival_rate(None)  # back to the workloads' own rates, unless the shape sets one
        if self.inner is not None:
            self.inner.reset_time()  # the shape's own clock starts now
        log.info("llmload: warm-up over after %g s; its requests are marked phase=warmup and left out of every "
                 "verdict", self.plan.seconds)

    def describe(self) -> dict[str, Any]:
        """The shape after the warm-up, as it describes itself (PREFIX_run.json's ``shape``)."""
        describe = getattr(self.inner, "describe", None)
        return describe() if callable(describe) else {}
