"""The reader's passes: paced while sockets keep being ready, and cut at a time budget with the
rest of the ready sockets read by the next pass (none lost, none read twice)."""

from __future__ import annotations

import socket

import gevent

from llmload.transport import reader as reader_mod


class Counting:
    """Stands in for a ResponseStream: counts its reads and drains its socket."""

    def __init__(self, sock: socket.socket) -> None:
        self.raw = sock
        self.fd = -1
        self.reads = 0
        self.result = None

    def on_readable(self, offset: float, pass_start: float) -> None:
        self.reads += 1
        self.raw.recv(4096)

    def deadline(self) -> float:
        return float("inf")


def test_a_pass_over_budget_leaves_the_rest_to_the_next(monkeypatch):
    monkeypatch.setattr(reader_mod, "PASS_BUDGET_S", 0.0)  # every group of sockets is over budget
    r = reader_mod.Reader()
    pairs = [socket.socketpair() for _ in range(40)]
    streams = []
    try:
        for a, b in pairs:
            b.setblocking(False)
            st = Counting(b)
            r.watch(st, b.fileno())
            streams.append(st)
            a.send(b"x")
        gevent.sleep(0)
        assert r._read_pass() == 40
        assert sum(st.reads for st in streams) == reader_mod.SOCKETS_PER_CHECK  # one group, then the budget
        assert r._read_pass() == 40 - reader_mod.SOCKETS_PER_CHECK  # the rest, still ready
        assert r._read_pass() == 40 - 2 * reader_mod.SOCKETS_PER_CHECK
        r._read_pass()
        assert r._read_pass() == 0
        assert [st.reads for st in streams] == [1] * 40
    finally:
        for st in streams:
            r.unwatch(st)
        r._io.stop()  # this reader is the test's own, not the process's: take it off the loop
        r._pace.stop()
        r.epoll.close()
        for a, b in pairs:
            a.close()
            b.close()


def wait_until(cond, timeout_s: float = 5.0) -> bool:
    """Bounded: a busy neighbour may delay the loop, so wait for the reader rather than guess."""
    for _ in range(int(timeout_s / 0.002)):
        if cond():
            return True
        gevent.sleep(0.002)
    return cond()


def test_the_reader_paces_while_data_keeps_coming_and_then_waits_again():
    r = reader_mod.reader()
    a, b = socket.socketpair()
    b.setblocking(False)
    st = Counting(b)
    r.watch(st, b.fileno())
    try:
        for n in range(1, 6):
            a.send(b"x")
            assert wait_until(lambda n=n: st.reads == n), st.reads  # each byte read once, none twice
        # a pass that found nothing: back to waiting on the descriptor
        assert wait_until(lambda: not r._pace.active and r._io.active)
        a.send(b"x")
        assert wait_until(lambda: st.reads == 6), st.reads
    finally:
        r.unwatch(st)
        a.close()
        b.close()
