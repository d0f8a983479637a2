"""Load shapes: how many users (or how many arrivals per second) run when, and the SLO stop.

* :class:`StepLoadShape`: each user count of ``steps`` for ``step_seconds``, then the end.
* :class:`RampLoadShape`: a straight ramp from ``ramp_from`` to ``ramp_users`` over
  ``ramp_seconds``, then ``hold_seconds`` at the top.
* :class:`RateLadderShape`: for open-loop workloads: ``users`` senders while the arrival rate
  climbs ``rate_steps`` (requests/s), one per ``step_seconds``.
* :class:`~llmload.shapes.search_shape.SearchLoadShape` (its own module): finds the highest load
  that meets every SLO by bisection over measured steps, then ends the run.

Every shape gives the requests in flight at the end time to finish: without ``--stop-timeout``,
Locust's stop timeout becomes ``DEFAULT_STOP_TIMEOUT_S``, so the last step loses no request.

Settings come from the command line (``--steps``, ``--step-seconds``, ``--step-spawn-rate``,
``--ramp-users``, ``--ramp-seconds``, ``--ramp-hold-seconds``, ``--rate-steps``, ``--search*``;
in the web UI's start form too), else from a ``shape:`` mapping in the scenario file, else from
the class.
Locust's ``--class-picker`` lets the web UI choose among the shapes of a locustfile.

**SLO stop** (``--slo-stop-after S``): when a step's verdict (:mod:`llmload.shapes.slo_stop`: the
report's judge on the report's window, every SLO including the scenario-scoped ones, after the
warm-up ``--search-warmup-s``) stays broken for S seconds, ``--slo-stop-action stop`` ends the
run and ``hold`` goes back to the last step that met every SLO and holds it to the end of the
schedule. So "find my capacity" is one command.

**Precision stop** (``--step-precision PCT``, the step shape): a step ends early once the 95 %
intervals of its SLO percentiles are within PCT % of their values and its sample floor is met;
``--step-seconds`` is then the cap (:mod:`llmload.shapes.precision`; PREFIX_run.json's
``shape.step_log`` says how each step ended and why). The pure schedules are :func:`step_schedule` and
:func:`ramp_schedule`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from locust import LoadTestShape

from llmload.metrics.record import CSV_COLUMNS
from llmload.shapes.control import control_of
from llmload.shapes.precision import PrecisionSteps
from llmload.shapes.schedules import parse_rates, parse_steps, ramp_schedule, step_schedule
from llmload.shapes.slo_stop import SLOStop

DEFAULT_STOP_TIMEOUT_S = 60.0
SCENARIO_COL = CSV_COLUMNS.index("scenario")
log = logging.getLogger("llmload")


class _Settings:
    """CLI option > scenario ``shape:`` > class attribute, for one shape instance."""

    def __init__(self, shape: LoadTestShape) -> None:
        env = shape.runner.environment if shape.runner is not None else None
        self.opts = env.parsed_options if env is not None else None
        self.control = control_of(env)
        self.yaml = self.control.shape_settings() if self.control is not None else {}
        self.shape = shape

    def get(self, option: str, yaml_key: str, attr: str) -> Any:
        v = getattr(self.opts, option, None) if self.opts is not None else None
        if v not in (None, "", 0, 0.0):
            return v
        if yaml_key in self.yaml:
            return self.yaml[yaml_key]
        return getattr(self.shape, attr)


def _slo_stop(settings: _Settings, warmup_s: float, floor: int) -> SLOStop:
    after_s = float(settings.get("slo_stop_after", "slo_stop_after_s", "slo_stop_after_s") or 0.0)
    action = settings.get("slo_stop_action", "slo_stop_action", "slo_stop_action") or "stop"
    if action not in ("stop", "hold"):
        raise ValueError(f"--slo-stop-action {action!r}: expected stop or hold")
    control = settings.control
    slos = control.slos() if control is not None and after_s > 0 else []
    stop = SLOStop(slos, after_s, warmup_s, floor, action)
    if stop.slos:
        control.watch_rows(stop.add)
    return stop


class _LLMShape(LoadTestShape):
    """What every llmload shape does at the start of a test: a default stop timeout."""

    abstract = True

    def reset_time(self) -> None:  # Locust calls it when a shape test starts, before the first tick
        super().reset_time()
        env = self.runner.environment if self.runner is not None else None
        if env is not None and not env.stop_timeout:
            env.stop_timeout = DEFAULT_STOP_TIMEOUT_S
            log.info("llmload: requests in flight at the end get up to %g s to finish (--stop-timeout)",
                     DEFAULT_STOP_TIMEOUT_S)

    def describe(self) -> dict[str, Any]:
        """The shape's settings as this run resolved them (for PREFIX_run.json)."""
        return {}

    def _report(self, text: str) -> None:
        control = control_of(self.runner.environment) if self.runner is not None else None
        if control is not None:
            control.stopped_because(text)
        log.warning(text)


class StepLoadShape(_LLMShape):
    abstract = True
    steps: Sequence[int] = (4, 8, 16, 32)
    step_seconds: float = 30.0
    spawn_rate: float = 100.0
    slo_stop_after_s: float = 0.0
    slo_stop_action: str = "stop"
    warmup_s: float = 5.0  # the SLO stop judges each step after it (--search-warmup-s; the report uses the same)
    sample_floor: int = 30  # ok requests a step needs for a verdict, as the report's --sample-floor
    step_precision: float = 0.0  # > 0: a step may end early once its SLO percentiles are known to this % (precision)
    step_warmup_s: float = 0.0  # with step_precision: seconds after each change not judged (0: warmup_s)

    def __init__(self) -> None:
        super().__init__()
        self._stop: SLOStop | None = None
        self._held: int | None = None
        self._ladder: PrecisionSteps | None = None
        self._watching = False

    def reset_time(self) -> None:
        super().reset_time()
        self._held = None
        self._ladder = None  # a new test (the web UI's start after a stop) starts at the first step again
        if self._stop is not None:
            self._stop.reset()  # a new test (the web UI's start after a stop) judges afresh

    def _settings(self) -> tuple[tuple[int, ...], float, float]:
        s = _Settings(self)
        steps = parse_steps(s.get("steps", "steps", "steps"))
        seconds = float(s.get("step_seconds", "step_seconds", "step_seconds"))
        rate = float(s.get("step_spawn_rate", "spawn_rate", "spawn_rate"))
        if seconds <= 0 or rate <= 0:
            raise ValueError(f"step shape: step seconds and spawn rate must be > 0, got {seconds}, {rate}")
        if self._stop is None:
            warmup_s = float(s.get("search_warmup_s", "search_warmup_s", "warmup_s"))
            self._stop = _slo_stop(s, warmup_s, int(s.yaml.get("search_sample_floor", self.sample_floor)))
        self._precision = float(s.get("step_precision", "step_precision", "step_precision") or 0.0)
        if self._precision < 0:
            raise ValueError(f"--step-precision {self._precision:g}: expected a percentage > 0, e.g. 5 (0: off)")
        if self._precision and self._ladder is None:
            warmup = float(s.get("step_warmup_s", "step_warmup_s", "step_warmup_s") or 0.0) or float(
                s.get("search_warmup_s", "search_warmup_s", "warmup_s"))
            self._ladder = PrecisionSteps(
                steps, seconds, self._precision, s.control.slos() if s.control is not None else [], warmup,
                int(s.get("step_sample_floor", "step_sample_floor", "sample_floor")), time.time())
            if s.control is not None and not self._watching:
                s.control.watch_rows(self._on_rows)  # once: a new test's ladder gets the rows through it
                self._watching = True
        return steps, seconds, rate

    def _on_rows(self, rows: list[tuple]) -> None:
        if self._ladder is not None:
            self._ladder.add(rows)

    def _now_at(self, steps: tuple[int, ...], seconds: float) -> tuple[int | None, int]:
        """(users, step index) now: the fixed schedule, or the precision ladder's wall clock."""
        ladder = self._ladder
        if ladder is None:
            t = self.get_run_time()
            return step_schedule(t, steps, seconds), int(t // seconds)
        control = control_of(self.runner.environment) if self.runner is not None else None
        users = ladder.users(time.time(), control.live_lag_s() if control is not None else 0.0)
        return users, ladder.index

    def tick(self) -> tuple[int, float] | None:
        steps, seconds, rate = self._settings()
        t = self.get_run_time()
        if self._held is not None:
            return (self._held, rate) if t < len(steps) * seconds else None
        users, index = self._now_at(steps, seconds)
        if users is None:
            return None
        stop = self._stop
        if stop is not None and stop.slos:
            control = control_of(self.runner.environment) if self.runner is not None else None
            lag = control.live_lag_s() if control is not None else 0.0
            if stop.check(index, users, time.time(), lag):
                last_good = stop.last_good(steps, index)
                what = ", ".join(stop.broken)
                at = f"{stop.broken_level:g}" if stop.broken_level is not None else f"{users}"
                if stop.action == "hold" and last_good is not None:
                    self._held = last_good
                    self._report(f"SLO stop: {what} for {stop.after_s:g} s at {at} users; holding the last step "
                                 f"that met every SLO, {last_good} users, to the end of the schedule")
                    return last_good, rate
                good = f"last step that met every SLO: {last_good} users" if last_good is not None \
                    else "no step met every SLO"
                self._report(f"SLO stop: {what} for {stop.after_s:g} s at {at} users; {good}; run ended")
                return None
        return users, rate

    def describe(self) -> dict[str, Any]:
        steps, seconds, rate = self._settings()
        return {"steps": list(steps), "step_seconds": seconds, "spawn_rate": rate,
                "slo_stop_after_s": self._stop.after_s if self._stop else 0.0,
                "slo_stop_action": self._stop.action if self._stop else "stop",
                "warmup_s": self._stop.warmup_s if self._stop else self.warmup_s,
                **(self._ladder.describe() if self._ladder is not None else {})}


class RampLoadShape(_LLMShape):
    abstract = True
    ramp_from: int = 1
    ramp_users: int = 64
    ramp_seconds: float = 300.0
    hold_seconds: float = 0.0

    def tick(self) -> tuple[int, float] | None:
        s = _Settings(self)
        end = int(s.get("ramp_users", "ramp_users", "ramp_users"))
        ramp_s = float(s.get("ramp_seconds", "ramp_seconds", "ramp_seconds"))
        hold_s = float(s.get("ramp_hold_seconds", "ramp_hold_seconds", "hold_seconds"))
        if end <= 0 or ramp_s < 0 or hold_s < 0:
            raise ValueError(f"ramp shape: expected users > 0 and seconds >= 0, got {end}, {ramp_s}, {hold_s}")
        users = ramp_schedule(self.get_run_time(), self.ramp_from, end, ramp_s, hold_s)
        if users is None:
            return None
        rate = max(1.0, abs(end - self.ramp_from) / max(ramp_s, 1.0) * 2)
        return users, rate

    def describe(self) -> dict[str, Any]:
        s = _Settings(self)
        return {"ramp_from": self.ramp_from, "ramp_users": int(s.get("ramp_users", "ramp_users", "ramp_users")),
                "ramp_seconds": float(s.get("ramp_seconds", "ramp_seconds", "ramp_seconds")),
                "hold_seconds": float(s.get("ramp_hold_seconds", "ramp_hold_seconds", "hold_seconds"))}


class RateLadderShape(_LLMShape):
    abstract = True
    users: int = 64  # senders; the arrival rate, not this, sets the load
    rate_steps: Sequence[float] = (1.0, 2.0, 4.0, 8.0)
    step_seconds: float = 30.0

    def tick(self) -> tuple[int, float] | None:
        s = _Settings(self)
        rates = parse_rates(s.get("rate_steps", "rate_steps", "rate_steps"))
        seconds = float(s.get("step_seconds", "step_seconds", "step_seconds"))
        users = self.users
        rate = step_schedule(self.get_run_time(), rates, seconds)
        if rate is None:
            return None
        if s.control is not None:
            s.control.set_arrival_rate(rate)
        return users, float(users)

    def describe(self) -> dict[str, Any]:
        s = _Settings(self)
        return {"users": self.users, "rate_steps": list(parse_rates(s.get("rate_steps", "rate_steps", "rate_steps"))),
                "step_seconds": float(s.get("step_seconds", "step_seconds", "step_seconds"))}


