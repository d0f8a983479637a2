"""When the profiler of ``--profile-step N`` starts and stops, pure: the leading process tells it the
load it sees (the runner's target user count and the arrival rate it sets), and it answers with the
moment to call ``/start_profile`` or ``/stop_profile``.

A *step* is what ``llmload report`` calls one: a stretch of one load level (user count, or arrival
rate of open-loop workloads). Step 1 is the first level after the ``--warmup-seconds`` warm-up (or
from the start without one); every change of the level begins the next. Each step's measured
window opens ``warmup_s`` after it begins (the report's warm-up: the shape's ``warmup_s`` in
PREFIX_run.json, else 5 s) and closes where the next step begins. So the profiler

* starts ``LEAD_S`` before step N's window opens (a profiler takes a moment to start; never before the
  step itself begins), and
* stops ``GRACE_S`` after the level changes again, or when the run ends: the report closes the window
  at the next step's first request, which the users send a moment after the shape moved on.

A plain ``-u``/``-t`` run has one step: ``--profile-step 1`` profiles the run after its warm-up.

Usage::

    clock = ProfileClock(step=2, warmup_s=5.0)
    clock.observe(now, level=(4, None), measuring=True)    # None, "start" or "stop": call it now
    clock.ended(now)                                       # "stop" if the profiler still runs
    clock.why_not()                                        # why it never started ('' if it did)
"""

from __future__ import annotations

from collections.abc import Hashable

LEAD_S = 1.0
GRACE_S = 1.0
START, STOP = "start", "stop"


class ProfileClock:
    """See the module docstring. ``observe`` is called every ~0.2 s by the leading process."""

    def __init__(self, step: int, warmup_s: float, lead_s: float = LEAD_S, grace_s: float = GRACE_S) -> None:
        if step < 1:
            raise ValueError(f"--profile-step {step}: expected a step number >= 1")
        self.step, self.warmup_s, self.lead_s, self.grace_s = step, max(0.0, warmup_s), lead_s, grace_s
        self.index = 0  # the step running now (0: none yet)
        self._level: Hashable = None
        self.step_began: float | None = None  # when step ``step`` began (epoch s)
        self.changed_at: float | None = None  # when the level changed after it
        self.started = self.stopped = False

    @property
    def window_opens(self) -> float | None:
        """Where the report's window of the chosen step opens, as seen here (None: not begun yet)."""
        return None if self.step_began is None else self.step_began + self.warmup_s

    def observe(self, now: float, level: Hashable, measuring: bool) -> str | None:
        """The load seen at ``now``; ``measuring``: the warm-up (if any) is over."""
        if not measuring or self.stopped:
            return None
        if self.index == 0 or level != self._level:
            self._level = level
            self.index += 1
            if self.index == self.step:
                self.step_began = now
            elif self.index == self.step + 1:
                self.changed_at = now
        if self.index == self.step and not self.started:
            opens = self.window_opens
            assert opens is not None
            if now >= max(self.step_began or now, opens - self.lead_s):
                self.started = True
                return START
        if self.started and self.changed_at is not None and now >= self.changed_at + self.grace_s:
            self.stopped = True
            return STOP
        return None

    def ended(self, now: float) -> str | None:
        """The run ended: stop a profiler that still runs."""
        if self.started and not self.stopped:
            self.stopped = True
            return STOP
        return None

    def why_not(self) -> str:
        """Why the profiler never started, for the manifest and the log ('' when it did)."""
        if self.started:
            return ""
        if self.index < self.step:
            return (f"the run had {self.index} step(s), so step {self.step} never came (--profile-step counts the "
                    "load levels after the warm-up, as the report's steps)")
        return f"step {self.step} ended within its {self.warmup_s:g}-s warm-up, before its measured window opened"
