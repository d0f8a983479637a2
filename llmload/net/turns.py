"""Time slices in the gevent loop: code that runs many things in one turn (users starting
requests together, the metrics parse, row shipping) pauses so that the loop polls its sockets,
and every stream's next read is stamped on time. ``health.stalls.StallWatch`` marks when each
turn begins; without it the slices are no-ops.
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter
from typing import Any, TypeVar

import gevent

T = TypeVar("T")

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


def off_the_loop(fn: Callable[..., T], *args: Any, hold: Any = None) -> T:
    """``fn(*args)`` in gevent's thread pool: this greenlet waits, the loop goes on. For a call that
    blocks in the kernel (a whole file's fsync): in the loop, one took 2.1 s on a busy disk and ate
    half of a 4-s run before its first request. ``hold`` (a gevent lock) is taken first and given
    back when the call is done in its thread, even if this greenlet is killed meanwhile: the calls
    that share it land in the order they were made."""
    if hold is not None:
        hold.acquire()
    try:
        job = gevent.get_hub().threadpool.spawn(caught, fn, *args)
    except BaseException:
        if hold is not None:
            hold.release()
        raise
    if hold is not None:
        job.rawlink(lambda _job: hold.release())
    result, error = job.get()
    if error is not None:
        raise error
    return result


def caught(fn: Callable[..., T], *args: Any) -> tuple[T | None, BaseException | None]:
    """``(fn(*args), None)``, or ``(None, the exception)``: raised in the pool's thread, gevent would
    print it with its own traceback before the caller gets it (a disk-full error, said twice)."""
    try:
        return fn(*args), None
    except Exception as e:  # noqa: BLE001 - handed back whole to the caller, which raises it
        return None, e


def let_io_run() -> None:
    """Pause so that the loop polls its sockets before this greenlet goes on. ``gevent.sleep(0)``
    does not: gevent runs callbacks scheduled meanwhile in the same loop turn (up to the switch
    interval), so a loop of work slices with ``sleep(0)`` between them is still one long turn."""
    gevent.sleep(IO_YIELD_S)
