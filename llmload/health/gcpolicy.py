"""The garbage collector's settings for a Locust process that times streams.

A full collection walks every tracked object: with 1,024 users (their greenlets, sockets,
workloads, Locust's and llmload's stats) that held the event loop for ~100 ms, and every stream
in flight got one late read. Two changes keep the collector out of the steady state:

* ``gc.freeze()`` of what start-up built: once before users start (after a full collection, while
  nothing is timed), again when all users are spawned and a moment later (their connections): what
  exists then lives for the run, and frozen objects are never scanned again (a freeze without a
  collection is O(1); it keeps only cyclic garbage of that moment alive);
* a young-generation threshold of 20,000 instead of 700. What remains: a young pass scans every
  object of the requests in flight (the count that triggers it is allocations minus frees, so it
  does not bound that list): about 12 per request, 3-9 ms at 1,024 streams. With 700 that came
  about twice a second (up to 8 ms each), with 20,000 about every 10 s; nothing short of not
  collecting (and leaking any cyclic garbage a user's code makes) removes it.

Usage::

    install(environment.events)   # once per Locust process (the plugin does it)
"""

from __future__ import annotations

import gc
from time import perf_counter
from typing import Any

import gevent

GEN0 = 20_000  # Python's default is 700: a young pass every 700 new containers
GEN1 = 20
GEN2 = 100
FREEZE_AGAIN_S = 2.0  # after spawning completes: the last users' on_start (connections) are done


_installed: set[int] = set()


def install(events: Any) -> None:
    """Thresholds now; a collection and freeze at each test start, freezes when users are spawned
    (once per set of events, however many environments share it)."""
    tune_thresholds()
    if id(events) in _installed:
        return
    _installed.add(id(events))
    events.test_start.add_listener(lambda **_kw: freeze_long_lived())
    events.spawning_complete.add_listener(lambda **_kw: _freeze_spawned())


def _freeze_spawned() -> None:
    gc.freeze()
    gevent.spawn_later(FREEZE_AGAIN_S, gc.freeze)


def tune_thresholds() -> None:
    gc.set_threshold(GEN0, GEN1, GEN2)


def freeze_long_lived() -> float:
    """Collect once, then move every surviving object out of the collector's reach; returns the ms
    it took (a one-off at the end of start-up, not a steady-state pause)."""
    t = perf_counter()
    gc.collect()
    gc.freeze()
    return (perf_counter() - t) * 1000.0
