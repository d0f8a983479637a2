"""The process's one reader of every open stream's socket, and the one timeout checker.

One reader instead of a read loop per greenlet, and no timer armed per read, are what
was measured as the big wins (docs/architecture.md#the-hot-path): libev watches one epoll descriptor, and each
wake-up reads every ready socket once in one Python call.

Paced passes: at most one pass per ``PACE_S``. With 1,024 streams a token arrives every ~20 µs,
and a pass per arrival paid a whole loop turn (libev's epoll_wait, the reader's own poll, the
stall watch's two callbacks) for one token. While passes find sockets ready, a repeating timer
runs them every ``PACE_S`` instead, so each reads every socket that became ready meanwhile; when
a pass finds none the reader goes back to waiting on its descriptor. Nothing is timed by when it
is read (every read carries the kernel's receive time), so pacing moves no timestamp; it only
makes a stream's two events that arrive within ``PACE_S`` one read (counted as coalesced).

Usage::

    r = reader()                 # this process's reader (Locust --processes forks: one per process)
    r.watch(response_stream, sock.fileno())
    r.unwatch(response_stream)   # the stream calls it when it ends
"""

from __future__ import annotations

import os
from time import perf_counter
from typing import TYPE_CHECKING

import gevent
from gevent.hub import get_hub
from gevent.monkey import get_original

from llmload.net.timestamps import clock_offset, sent_at

if TYPE_CHECKING:
    from llmload.transport.stream import ResponseStream

CHECK_INTERVAL_S = 0.1
PACE_S = 0.001  # libev's epoll backend sleeps in whole milliseconds anyway
PASS_BUDGET_S = 0.001  # a pass reads for about this long; what is left waits for the next
SOCKETS_PER_CHECK = 16  # the clock is read between groups of sockets, not per socket
_EPOLLIN = 1
_EPOLLERR = 8


class Reader:
    """The process's one reader: every open stream's socket in one epoll set, one timeout checker.

    libev watches the epoll descriptor itself; each wake-up drains every ready socket in one
    Python call. Every read carries the kernel's receive timestamp (``SO_TIMESTAMPNS``,
    converted to the ``perf_counter`` clock), so a token's time is when it reached this machine,
    not when this loop got round to it: timings stay exact when the client falls behind
    (benchmarks/client_overhead.py: first-token timestamp error p99 < 0.01 ms at 1,024 streams).
    """

    def __init__(self) -> None:
        self.loop = get_hub().loop
        self.active: set[ResponseStream] = set()
        self.by_fd: dict[int, ResponseStream] = {}
        # gevent's monkey-patching hides epoll; the reader needs the real one (never blocks on it).
        self.epoll = get_original("select", "epoll")()
        self._io = self.loop.io(self.epoll.fileno(), 1)
        self._io.start(self._on_ready)
        self._pace = self.loop.timer(PACE_S, PACE_S)
        self._checker: gevent.Greenlet | None = None

    def watch(self, st: ResponseStream, fd: int) -> None:
        self.epoll.register(fd, _EPOLLIN)
        st.fd = fd
        self.by_fd[fd] = st
        self.active.add(st)
        if self._checker is None or self._checker.dead:
            self._checker = gevent.spawn(self._check_timeouts)

    def unwatch(self, st: ResponseStream) -> None:
        fd = st.fd
        if fd >= 0 and self.by_fd.get(fd) is st:
            del self.by_fd[fd]
            try:
                self.epoll.unregister(fd)
            except OSError:
                pass  # already closed
        st.fd = -1
        self.active.discard(st)

    def _on_ready(self) -> None:
        # The descriptor woke the loop: read now, then pace the next passes.
        self._read_pass()
        self._io.stop()
        self._pace.start(self._on_pace)

    def _on_pace(self) -> None:
        if not self._read_pass():  # quiet: wait on the descriptor again
            self._pace.stop()
            self._io.start(self._on_ready)

    def _read_pass(self) -> int:
        """One pass over every ready socket; returns how many were ready."""
        ready = self.epoll.poll(0)
        if not ready:
            return 0
        # One offset per pass: kernel timestamps are CLOCK_REALTIME, ours CLOCK_MONOTONIC.
        offset = clock_offset()
        pass_start = perf_counter()
        by_fd = self.by_fd
        n = len(ready)
        for lo in range(0, n, SOCKETS_PER_CHECK):
            if lo and perf_counter() - pass_start > PASS_BUDGET_S:
                # A server's decode step sends a token to every stream at once: reading them all
                # in one turn held the loop 2-3 ms at 128 streams. The rest stay ready (epoll is
                # level-triggered, and re-queues them ahead of newer arrivals): the next paced
                # pass reads them, each with its kernel receive time.
                break
            for fd, events in ready[lo:lo + SOCKETS_PER_CHECK]:
                st = by_fd.get(fd)
                if st is not None:
                    if events & _EPOLLERR:
                        # A transmit stamp that came after the request's own check (an asynchronous
                        # NIC queue) waits in the error queue and keeps the descriptor ready: drain it.
                        sent_at(st.raw, offset)
                    st.on_readable(offset, pass_start)
        return n

    def _check_timeouts(self) -> None:
        # One pass over every stream per interval instead of a timer per read; with many streams
        # the interval grows (a deadline of minutes needs no 0.1 s precision).
        while self.active:
            gevent.sleep(CHECK_INTERVAL_S if len(self.active) < 2000 else CHECK_INTERVAL_S * 5)
            now = perf_counter()
            for st in list(self.active):
                if st.result is None:
                    if now > st.deadline():
                        # Waiter.switch must run in the hub: hand the ending over to it.
                        self.loop.run_callback(st.end, "timeout", st.timeout_detail())
                    elif len(st.acc.times) > st.max_events:  # a server that ignores max_tokens
                        self.loop.run_callback(st.over_cap)


_readers: dict[tuple[int, int], Reader] = {}


def reader() -> Reader:
    key = (os.getpid(), id(get_hub()))  # Locust --processes forks: one reader per process
    r = _readers.get(key)
    if r is None:
        r = _readers[key] = Reader()
    return r
