"""Load schedules, pure: which step (user count or arrival rate) is wanted at a run time, and the
parsing of the step lists that the command line, the web UI form and scenario files give.

Usage::

    parse_steps("4,8,16")                     # (4, 8, 16)
    step_schedule(45.0, (4, 8, 16), 30.0)     # 8
    ramp_schedule(30.0, 1, 64, 60.0, 0.0)     # 32
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

STOP_ACTIONS = ("stop", "hold")


def _parse_list(text: str | Sequence[Any], conv: type, where: str, what: str) -> tuple[Any, ...]:
    items = text.split(",") if isinstance(text, str) else list(text)
    try:
        values = tuple(conv(str(x).strip()) for x in items if str(x).strip())
    except ValueError:
        raise ValueError(f"{where} {text!r}: expected {what} separated by commas") from None
    if not values or any(v <= 0 for v in values):
        raise ValueError(f"{where} {text!r}: expected one or more {what} above 0")
    return values


def parse_steps(text: str | Sequence[int], where: str = "--steps") -> tuple[int, ...]:
    """``"4,8,16"`` → (4, 8, 16); every step a positive whole number of users."""
    return _parse_list(text, int, where, "user counts, e.g. 4,8,16,")


def parse_rates(text: str | Sequence[float], where: str = "--rate-steps") -> tuple[float, ...]:
    """``"2,4,8"`` → (2.0, 4.0, 8.0) requests/s."""
    return _parse_list(text, float, where, "requests/s, e.g. 2,4,8,")


def step_schedule(t: float, steps: Sequence[Any], step_seconds: float) -> Any:
    """The step wanted at run time ``t`` (seconds); None once the last step is over."""
    if t < 0:
        return steps[0]
    index = int(t // step_seconds)
    return steps[index] if index < len(steps) else None


def ramp_schedule(t: float, start: int, end: int, ramp_s: float, hold_s: float) -> int | None:
    """Users wanted at run time ``t`` of a linear ramp; None after ramp + hold."""
    if t >= ramp_s + hold_s:
        return None
    if ramp_s <= 0 or t >= ramp_s:
        return end
    return int(round(start + (end - start) * max(t, 0.0) / ramp_s))
