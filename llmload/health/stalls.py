"""Event-loop stalls: how long the loop went without polling its sockets, and what ran meanwhile.

A *stall* is one turn of the gevent loop (from the moment ``epoll`` returned to the moment the
loop is about to poll again) that took longer than ``STALL_MS``: for that long no socket was
read, no timer fired, and every stream's next read waited. Each turn is timed by two libev
watchers (a ``check`` at the highest priority opens the turn, a ``prepare`` at the lowest closes
it); ``greenlet.settrace`` times each greenlet's run inside the turn and ``gc.callbacks`` the
collector's passes, so a long turn gets a culprit: a greenlet (``LLMUser``, ``stats_writer``...),
the hub's own callbacks (the socket reader, timers), the garbage collector, or "off CPU" (the
thread used less than ``STALL_MS`` of CPU in the turn: another process had the core, or something
in the loop made a blocking call).

Cost: two Python callbacks per loop turn and one per greenlet switch (switches happen per
request, not per token, with the process's one reader): about 1 µs per turn and 0.6 µs per switch,
under 2 % of the client's CPU at 1,024 streams.

Usage::

    watch = StallWatch(); watch.start()
    ...
    interval = watch.take()          # StallStats since the last take (mergeable, to_wire/from_wire)
    print(describe_stalls(interval)) # "3 stalls over 2 ms, max 7.1 ms (gc gen 2) ..."
    watch.stop()
"""

from __future__ import annotations

import gc
import inspect
from collections import deque
from time import perf_counter, thread_time
from typing import Any

import greenlet
from gevent.hub import get_hub

from llmload.health.stall_names import greenlet_name
from llmload.net import turns

STALL_MS = 2.0  # a loop turn longer than this is a stall (the bar for anything periodic)
BOUNDS_MS = (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)  # turn-length buckets, lower bounds
KEEP_WORST = 5
CPU_MARK_TURNS = 16
HUB = "llmload's own HTTP handling (the socket reader and timers, in the loop's callbacks)"
OFF_CPU = "off CPU (the OS ran another process, or a blocking call)"
RECENT_STALLS = 1024  # stall spans kept to tell whether a request was in flight during one


def warm_inspect_cache() -> None:
    """Locust's ``Runner.stop()`` calls ``inspect.stack()``, whose first call in a process finds
    the file of every loaded module (~25 ms with Locust and llmload loaded): in the loop, at the
    moment a graceful stop (``--stop-timeout``) leaves every stream in flight, each of which then
    read two tokens at once. Paid once at test start instead, before any request."""
    inspect.stack()


class StallStats:
    """Loop turns by length (wall and CPU), and stalls by culprit. Pure, mergeable.

    A stall's wall time includes any time the OS gave the core to someone else; its CPU time is
    what this process itself did in the turn. On a busy machine the two differ a lot."""

    __slots__ = ("turns", "buckets", "cpu_buckets", "count", "own", "total_ms", "max_ms", "max_cpu_ms", "culprits",
                 "worst", "gc_passes", "gc_ms", "gc_max_ms")

    def __init__(self) -> None:
        self.turns = 0
        self.buckets = [0] * len(BOUNDS_MS)  # turns of at least BOUNDS_MS[i] (and below the next bound), wall
        self.cpu_buckets = [0] * len(BOUNDS_MS)  # the same turns by the CPU they used
        self.count = 0  # stalls: turns longer than STALL_MS
        self.own = 0  # stalls that used more than STALL_MS of CPU (this process's own doing)
        self.total_ms = 0.0
        self.max_ms = 0.0
        self.max_cpu_ms = 0.0
        self.culprits: dict[str, list[float]] = {}  # name → [stalls, wall ms, max wall ms, CPU ms, max CPU ms]
        self.worst: list[tuple[float, float, str]] = []  # the longest stalls: (wall ms, CPU ms, culprit)
        self.gc_passes = [0, 0, 0]  # the garbage collector's passes by generation, and their time
        self.gc_ms = 0.0
        self.gc_max_ms = 0.0

    def add(self, ms: float, cpu_ms: float, culprit: str) -> None:
        self.buckets[_bucket(ms)] += ms >= BOUNDS_MS[0]
        self.cpu_buckets[_bucket(cpu_ms)] += cpu_ms >= BOUNDS_MS[0]
        if ms <= STALL_MS:
            return
        self.count += 1
        self.own += cpu_ms > STALL_MS
        self.total_ms += ms
        self.max_ms = max(self.max_ms, ms)
        self.max_cpu_ms = max(self.max_cpu_ms, cpu_ms)
        c = self.culprits.setdefault(culprit, [0, 0.0, 0.0, 0.0, 0.0])
        c[0] += 1
        c[1] += ms
        c[2] = max(c[2], ms)
        c[3] += cpu_ms
        c[4] = max(c[4], cpu_ms)
        self.worst.append((round(ms, 2), round(cpu_ms, 2), culprit))
        self.worst.sort(reverse=True)
        del self.worst[KEEP_WORST:]

    def merge(self, other: StallStats) -> None:
        self.turns += other.turns
        self.buckets = [a + b for a, b in zip(self.buckets, other.buckets, strict=True)]
        self.cpu_buckets = [a + b for a, b in zip(self.cpu_buckets, other.cpu_buckets, strict=True)]
        self.count += other.count
        self.own += other.own
        self.total_ms += other.total_ms
        self.max_ms = max(self.max_ms, other.max_ms)
        self.max_cpu_ms = max(self.max_cpu_ms, other.max_cpu_ms)
        for name, v in other.culprits.items():
            c = self.culprits.setdefault(name, [0, 0.0, 0.0, 0.0, 0.0])
            c[0] += v[0]
            c[1] += v[1]
            c[2] = max(c[2], v[2])
            c[3] += v[3]
            c[4] = max(c[4], v[4])
        self.worst = sorted(self.worst + other.worst, reverse=True)[:KEEP_WORST]
        self.gc_passes = [a + b for a, b in zip(self.gc_passes, other.gc_passes, strict=True)]
        self.gc_ms += other.gc_ms
        self.gc_max_ms = max(self.gc_max_ms, other.gc_max_ms)

    def top_culprit(self) -> str:
        """The cause of the most stall time."""
        return max(self.culprits.items(), key=lambda kv: kv[1][1])[0] if self.culprits else ""

    def to_wire(self) -> dict[str, Any]:
        return {"turns": self.turns, "buckets": self.buckets, "cpu_buckets": self.cpu_buckets, "count": self.count,
                "own": self.own, "total_ms": round(self.total_ms, 3), "max_ms": round(self.max_ms, 3),
                "max_cpu_ms": round(self.max_cpu_ms, 3),
                "culprits": {k: [int(v[0]), *(round(x, 3) for x in v[1:])] for k, v in self.culprits.items()},
                "worst": [list(w) for w in self.worst],
                "gc": [*self.gc_passes, round(self.gc_ms, 3), round(self.gc_max_ms, 3)]}

    @classmethod
    def from_wire(cls, data: dict[str, Any]) -> StallStats:
        s = cls()
        s.turns, s.count, s.own = int(data["turns"]), int(data["count"]), int(data["own"])
        s.buckets, s.cpu_buckets = list(data["buckets"]), list(data["cpu_buckets"])
        s.total_ms, s.max_ms, s.max_cpu_ms = float(data["total_ms"]), float(data["max_ms"]), float(data["max_cpu_ms"])
        s.culprits = {k: [int(v[0]), *(float(x) for x in v[1:])] for k, v in data["culprits"].items()}
        s.worst = [(float(ms), float(cpu), str(name)) for ms, cpu, name in data["worst"]]
        *s.gc_passes, s.gc_ms, s.gc_max_ms = data["gc"]
        return s


def _bucket(ms: float) -> int:
    i = len(BOUNDS_MS) - 1
    while i > 0 and ms < BOUNDS_MS[i]:
        i -= 1
    return i


def bucket_label(i: int) -> str:
    hi = BOUNDS_MS[i + 1] if i + 1 < len(BOUNDS_MS) else None
    return f"{BOUNDS_MS[i]:g}-{hi:g} ms" if hi is not None else f">= {BOUNDS_MS[i]:g} ms"


def _by_length(buckets: list[int]) -> str:
    return ", ".join(f"{bucket_label(i)}: {n}" for i, n in enumerate(buckets) if n and BOUNDS_MS[i] >= STALL_MS) \
        or "none"


def describe_stalls(s: StallStats, top: int = 3) -> str:
    """One line: how many stalls, how many were this process's own doing (CPU over the bar), the
    longest, what caused the most stall time, the collector's passes."""
    gc_text = (f"garbage collector: {sum(s.gc_passes)} passes (gen 0/1/2: {'/'.join(map(str, s.gc_passes))}), "
               f"{s.gc_ms:.0f} ms of CPU in all, max {s.gc_max_ms:.1f} ms")
    if not s.count:
        return f"no event-loop stall over {STALL_MS:g} ms in {s.turns} loop turns; {gc_text}"
    culprits = sorted(s.culprits.items(), key=lambda kv: -kv[1][1])[:top]
    causes = "; ".join(f"{name} {int(v[0])}x, {v[1]:.0f} ms (CPU {v[3]:.0f} ms, max {v[4]:.1f} ms)"
                       for name, v in culprits)
    return (f"{s.count} event-loop stalls over {STALL_MS:g} ms in {s.turns} loop turns, longest {s.max_ms:.1f} ms "
            f"(by length {_by_length(s.buckets)}); {s.own} used over {STALL_MS:g} ms of CPU, at most "
            f"{s.max_cpu_ms:.1f} ms (by CPU {_by_length(s.cpu_buckets)}); by cause (wall, CPU): {causes}; {gc_text}")


class StallWatch:
    """Times every loop turn of this thread's hub; see the module docstring."""

    def __init__(self) -> None:
        self._stats = StallStats()
        self._hub = None
        self._check = self._prepare = None
        self._prev_trace = None
        self._turn_start = 0.0
        self._last_switch = 0.0
        self._hub_s = 0.0
        self._cpu_mark = 0.0  # the thread's CPU time at some earlier moment ...
        self._walls = 0.0  # ... and the wall time of the short turns since then
        self._turns_since_mark = 0
        self._spans: dict[Any, float] = {}  # greenlet → seconds it ran in this turn
        self._runs: dict[Any, tuple[Any, tuple]] = {}  # greenlet → (its function, its args), this turn
        self._gc_start = 0.0
        self._gc_s = 0.0
        self._gc_gen = 0
        self.recent: deque[tuple[float, float]] = deque(maxlen=RECENT_STALLS)  # (start, end) of the latest stalls

    def stalled_during(self, t0: float, t1: float) -> bool:
        """A stall of the loop overlapped ``[t0, t1]`` (``perf_counter`` times): a request timed by
        the clock after each read (no kernel timestamps) may then read late by up to its length."""
        for start, end in reversed(self.recent):
            if end < t0:
                return False  # the spans come in order: every older one ended before t0 too
            if start <= t1:
                return True
        return False

    @property
    def running(self) -> bool:
        return self._check is not None

    def start(self) -> None:
        if self.running:
            return
        warm_inspect_cache()
        hub = self._hub = get_hub()
        loop = hub.loop
        self._check = loop.check(ref=False, priority=2)  # libev EV_MAXPRI: before this turn's I/O callbacks
        self._prepare = loop.prepare(ref=False, priority=-2)  # EV_MINPRI: after gevent's own callbacks
        self._check.start(self._on_check)
        self._prepare.start(self._on_prepare)
        self._prev_trace = greenlet.settrace(self._on_switch)
        gc.callbacks.append(self._on_gc)
        self._turn_start = self._last_switch = perf_counter()
        self._cpu_mark = thread_time()

    def stop(self) -> None:
        if not self.running:
            return
        turns.turn_start = None
        self._check.stop()
        self._prepare.stop()
        self._check = self._prepare = None
        greenlet.settrace(self._prev_trace)
        self._prev_trace = None
        if self._on_gc in gc.callbacks:
            gc.callbacks.remove(self._on_gc)

    def take(self) -> StallStats:
        """The turns and stalls since the last call."""
        s, self._stats = self._stats, StallStats()
        return s

    # -- callbacks: each runs on every loop turn or switch, so each does as little as it can ------
    # The thread's CPU time is a system call (~1.5 µs, more than the rest of a turn's bookkeeping), so
    # it is read every CPU_MARK_TURNS turns and after a long one; a long turn's CPU is the CPU since
    # the mark minus the wall time of the short turns in between (they cannot have used more).
    def _on_check(self) -> None:
        turns.turn_start = self._turn_start = self._last_switch = perf_counter()
        self._hub_s = 0.0
        self._gc_s = 0.0
        if self._spans or self._runs:
            self._spans = {}
            self._runs = {}
        self._turns_since_mark += 1
        if self._turns_since_mark >= CPU_MARK_TURNS:
            self._turns_since_mark = 0
            self._cpu_mark = thread_time()
            self._walls = 0.0

    def _on_prepare(self) -> None:
        now = perf_counter()
        self._stats.turns += 1
        busy = now - self._turn_start
        if busy < BOUNDS_MS[0] / 1000.0:
            self._walls += busy
            return
        cpu = thread_time()
        cpu_ms = min(busy, max(0.0, cpu - self._cpu_mark - self._walls)) * 1000.0
        self._cpu_mark, self._walls, self._turns_since_mark = cpu, 0.0, 0
        busy_ms = busy * 1000.0
        if busy_ms > STALL_MS:
            self.recent.append((self._turn_start, now))
        self._stats.add(busy_ms, cpu_ms, self._culprit(busy_ms, self._hub_s + now - self._last_switch, cpu_ms))

    def _on_switch(self, event: str, args: Any) -> None:
        if event in ("switch", "throw"):
            origin, target = args
            if target is not self._hub and target not in self._runs:
                self._runs[target] = (getattr(target, "_run", None), getattr(target, "args", ()))
            now = perf_counter()
            span = now - self._last_switch
            self._last_switch = now
            if origin is self._hub:
                self._hub_s += span
            else:
                spans = self._spans
                spans[origin] = spans.get(origin, 0.0) + span
        if self._prev_trace is not None:
            self._prev_trace(event, args)

    def _on_gc(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "start":
            self._gc_start = thread_time()
            return
        took = thread_time() - self._gc_start
        self._gc_s += took
        self._gc_gen = gen = int(info.get("generation", 0))
        stats = self._stats
        stats.gc_passes[gen] += 1
        stats.gc_ms += took * 1000.0
        stats.gc_max_ms = max(stats.gc_max_ms, took * 1000.0)

    def _culprit(self, busy_ms: float, hub_s: float, cpu_ms: float) -> str:
        if cpu_ms < STALL_MS:  # what ran would not have stalled the loop by itself
            return OFF_CPU
        gc_ms = self._gc_s * 1000.0
        if gc_ms >= cpu_ms * 0.5:
            return f"gc gen {self._gc_gen}"
        by_name: dict[str, float] = {}
        for g, s in self._spans.items():
            name = greenlet_name(g, *self._runs.get(g, (getattr(g, "_run", None), getattr(g, "args", ()))))
            by_name[name] = by_name.get(name, 0.0) + s
        by_name[HUB] = by_name.get(HUB, 0.0) + hub_s
        return max(by_name.items(), key=lambda kv: kv[1])[0]
