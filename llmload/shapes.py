"""Load shapes: how many users run when.

:class:`StepLoadShape` holds each user count of ``steps`` for ``step_seconds`` and then ends
the test. ``--steps`` / ``--step-seconds`` / ``--step-spawn-rate`` override the class
attributes. The schedule itself is the pure function :func:`step_schedule`.

Usage (in a locustfile)::

    from llmload.shapes import StepLoadShape

    class Steps(StepLoadShape):
        steps = (4, 8, 16, 32)
        step_seconds = 30
"""

from __future__ import annotations

from collections.abc import Sequence

from locust import LoadTestShape


def parse_steps(text: str | Sequence[int], where: str = "--steps") -> tuple[int, ...]:
    """``"4,8,16"`` → (4, 8, 16); every step a positive whole number of users."""
    items = text.split(",") if isinstance(text, str) else list(text)
    try:
        steps = tuple(int(str(x).strip()) for x in items if str(x).strip())
    except ValueError:
        raise ValueError(f"{where} {text!r}: expected user counts separated by commas, e.g. 4,8,16") from None
    if not steps or any(s <= 0 for s in steps):
        raise ValueError(f"{where} {text!r}: expected one or more positive user counts")
    return steps


def step_schedule(t: float, steps: Sequence[int], step_seconds: float) -> int | None:
    """Users wanted at run time ``t`` (seconds); None once the last step is over."""
    if t < 0:
        return steps[0]
    index = int(t // step_seconds)
    return steps[index] if index < len(steps) else None


class StepLoadShape(LoadTestShape):
    abstract = True
    steps: Sequence[int] = (4, 8, 16, 32)
    step_seconds: float = 30.0
    spawn_rate: float = 100.0

    def _settings(self) -> tuple[tuple[int, ...], float, float]:
        opts = self.runner.environment.parsed_options if self.runner is not None else None
        steps = parse_steps(getattr(opts, "steps", "") or self.steps)
        seconds = float(getattr(opts, "step_seconds", 0) or self.step_seconds)
        rate = float(getattr(opts, "step_spawn_rate", 0) or self.spawn_rate)
        if seconds <= 0 or rate <= 0:
            raise ValueError(f"step shape: step seconds and spawn rate must be > 0, got {seconds}, {rate}")
        return steps, seconds, rate

    def tick(self) -> tuple[int, float] | None:
        steps, seconds, rate = self._settings()
        users = step_schedule(self.get_run_time(), steps, seconds)
        return None if users is None else (users, rate)
