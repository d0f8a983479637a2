"""Load shapes: how many users (or how many arrivals per second) run when, and the SLO stop.

* :class:`StepLoadShape`: each user count of ``steps`` for ``step_seconds``, then the end.
* :class:`RampLoadShape`: a straight ramp from ``ramp_from`` to ``ramp_users`` over
  ``ramp_seconds``, then ``hold_seconds`` at the top.
* :class:`RateLadderShape`: for open-loop workloads: ``users`` senders while the arrival rate
  climbs ``rate_steps`` (requests/s), one per ``step_seconds``.

Settings come from the command line (``--steps``, ``--step-seconds``, ``--step-spawn-rate``,
``--ramp-users``, ``--ramp-seconds``, ``--ramp-hold-seconds``, ``--rate-steps``; in the web UI's
start form too), else from a ``shape:`` mapping in the scenario file, else from the class.
Locust's ``--class-picker`` lets the web UI choose among the shapes of a locustfile.

**SLO stop** (``--slo-stop-after S``): when an SLO (``--slo`` or the scenario's ``slo:``) stays
broken on the live window for S seconds, ``--slo-stop-action stop`` ends the run and ``hold``
goes back to the last step that met every SLO and holds it to the end of the schedule. So
"find my capacity" is one command. The pure schedules are :func:`step_schedule` and
:func:`ramp_schedule`.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from locust import LoadTestShape

from llmload.schedules import parse_rates, parse_steps, ramp_schedule, step_schedule
from llmload.slo import broken_slos
from llmload.stats import ScenarioStats


class _Settings:
    """CLI option > scenario ``shape:`` > class attribute, for one shape instance."""

    def __init__(self, shape: LoadTestShape) -> None:
        env = shape.runner.environment if shape.runner is not None else None
        self.opts = env.parsed_options if env is not None else None
        self.plugin = getattr(env, "llmload", None)
        self.yaml = self.plugin.config.shape if self.plugin is not None else {}
        self.shape = shape

    def get(self, option: str, yaml_key: str, attr: str) -> Any:
        v = getattr(self.opts, option, None) if self.opts is not None else None
        if v not in (None, "", 0, 0.0):
            return v
        if yaml_key in self.yaml:
            return self.yaml[yaml_key]
        return getattr(self.shape, attr)


class _SLOStop:
    """Watches the live window; says when an SLO has stayed broken long enough."""

    def __init__(self, settings: _Settings) -> None:
        self.plugin = settings.plugin
        self.after_s = float(settings.get("slo_stop_after", "slo_stop_after_s", "slo_stop_after_s") or 0.0)
        self.action = settings.get("slo_stop_action", "slo_stop_action", "slo_stop_action") or "stop"
        if self.action not in ("stop", "hold"):
            raise ValueError(f"--slo-stop-action {self.action!r}: expected stop or hold")
        self.slos = self.plugin.config.slos if self.plugin is not None and self.after_s > 0 else []
        self.broken_since: float | None = None
        self.broken: list[str] = []

    def check(self, now: float) -> bool:
        """True once some SLO has been broken for ``after_s`` without a break."""
        if not self.slos:
            return False
        per, _ = self.plugin.live.merged(now, self.plugin.live_lag_s())
        total = ScenarioStats()
        for s in per.values():
            total.merge(s)
        self.broken = broken_slos(self.slos, per, total)
        if not self.broken:
            self.broken_since = None
            return False
        if self.broken_since is None:
            self.broken_since = now
        return now - self.broken_since >= self.after_s


class StepLoadShape(LoadTestShape):
    abstract = True
    steps: Sequence[int] = (4, 8, 16, 32)
    step_seconds: float = 30.0
    spawn_rate: float = 100.0
    slo_stop_after_s: float = 0.0
    slo_stop_action: str = "stop"

    def __init__(self) -> None:
        super().__init__()
        self._stop: _SLOStop | None = None
        self._good: dict[int, bool] = {}  # step index → met every SLO at its last check
        self._held: int | None = None

    def _settings(self) -> tuple[tuple[int, ...], float, float]:
        s = _Settings(self)
        steps = parse_steps(s.get("steps", "steps", "steps"))
        seconds = float(s.get("step_seconds", "step_seconds", "step_seconds"))
        rate = float(s.get("step_spawn_rate", "spawn_rate", "spawn_rate"))
        if seconds <= 0 or rate <= 0:
            raise ValueError(f"step shape: step seconds and spawn rate must be > 0, got {seconds}, {rate}")
        if self._stop is None:
            self._stop = _SLOStop(s)
        return steps, seconds, rate

    def tick(self) -> tuple[int, float] | None:
        steps, seconds, rate = self._settings()
        t = self.get_run_time()
        if self._held is not None:
            return (self._held, rate) if t < len(steps) * seconds else None
        users = step_schedule(t, steps, seconds)
        if users is None:
            return None
        index = int(t // seconds)
        stop = self._stop
        if stop is not None and stop.slos:
            tripped = stop.check(time.time())
            self._good[index] = not stop.broken
            if tripped:
                good = [steps[i] for i in sorted(self._good) if self._good[i] and i < index]
                last_good = good[-1] if good else None
                what = ", ".join(stop.broken)
                if stop.action == "hold" and last_good is not None:
                    self._held = last_good
                    self._report(f"SLO stop: {what} for {stop.after_s:g} s at {users} users; holding the last step "
                                 f"that met every SLO, {last_good} users, to the end of the schedule")
                    return last_good, rate
                self._report(f"SLO stop: {what} for {stop.after_s:g} s at {users} users; last step that met every "
                             f"SLO: {last_good if last_good is not None else 'none'} users; run ended")
                return None
        return users, rate

    def _report(self, text: str) -> None:
        plugin = getattr(self.runner.environment, "llmload", None) if self.runner is not None else None
        if plugin is not None:
            plugin.stop_reason = text
        import logging

        logging.getLogger("llmload").warning(text)


class RampLoadShape(LoadTestShape):
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


class RateLadderShape(LoadTestShape):
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
        if s.plugin is not None:
            s.plugin.set_arrival_rate(rate)
        return users, float(users)
