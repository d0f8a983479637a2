"""Time slices in the gevent loop: code that runs many things in one turn (users starting
requests together, the metrics parse, row shipping) pauses so that the loop polls its sockets,
and every stream's next read is stamped on time. ``health.stalls.StallWatch`` marks when each
turn begins; without it the slices are no-ops.
"""

from __future__ import annotations

from time import perf_counter

import gevent

IO_YIELD_S = 0.001
TURN_BUDGET_S = 0.0005
MAX_PAUSES = 16  # at most ~16 ms later
turn_start: float | None = None  # when the current loop turn began; set by health.stalls.StallWatch while it runs


def yield_if_turn_is_long() -> None:
    """Time slicing for the users: a user about to start a request in a loop turn that has already
    run ``TURN_BUDGET_S`` lets the loop poll first. Requests of a closed-loop test end together;
    256 users starting their next ones in the same turn held the loop ~20 ms, and every stream
    still in flight then read two tokens at once (their gap lost). A no-op without a StallWatch.

    Checked again after each pause (the users that paused together wake together, in one turn),
    at most ``MAX_PAUSES`` times: a client too busy to ever have a short turn still sends."""
    for _ in range(MAX_PAUSES):
        start = turn_start
        if start is None or perf_counter() - start <= TURN_BUDGET_S:
            return
        let_io_run()


def let_io_run() -> None:
    """Pause so that the loop polls its sockets before this greenlet goes on. ``gevent.sleep(0)``
    does not: gevent runs callbacks scheduled meanwhile in the same loop turn (up to the switch
    interval), so a loop of work slices with ``sleep(0)`` between them is still one long turn."""
    gevent.sleep(IO_YIELD_S)
