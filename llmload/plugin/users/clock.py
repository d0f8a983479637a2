"""Sending at a due time: sleep on a timer for most of the wait, yield to the hub for the rest
(libev wakes timers up to a millisecond late; the mock's driver waits the same way).

Usage::

    sleep_until(time.time() + 0.25)     # returns at the due time, not a millisecond after
"""

from __future__ import annotations

import time

import gevent

SPIN_S = 0.002


def sleep_until(t: float) -> None:
    """Sleep until Unix time ``t``: a timer for most of it, yields for the last ``SPIN_S``."""
    delay = t - time.time()
    if delay > SPIN_S:
        gevent.sleep(delay - SPIN_S)
    while time.time() < t:
        gevent.sleep(0)
