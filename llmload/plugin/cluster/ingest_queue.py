"""The master's queue of worker payloads still to be written: fair between workers, bounded, and
said aloud when it grows (issue 35).

Locust hands the master its messages one at a time, in the loop that also answers the workers'
heartbeats. Writing a payload's rows (the requests CSV, the live window, the users column) is the
master's real work: done inside that loop, a master behind its workers answered heartbeats late and
its workers took it for lost. So llmload's handlers only check and queue a payload, and one
greenlet writes the queue: one payload of each worker in turn (a worker that floods its messages
waits behind its own, not the others'), yielding to the loop between turns.

Past the master's capacity the backlog grows, in this queue or, since each payload is checked as
it is read, in ZeroMQ's buffers before it (:class:`ArrivalLag` reads that from the rows' own
times). That is said in one line once the oldest payload here has waited
``BEHIND_S``, or the newest payload came ``BEHIND_S`` later than its worker's usual, and again when
it has caught up. Past ``MAX_QUEUED_ROWS`` the master stops
reading its socket (:meth:`IngestQueue.full`; the channel guard waits): the workers' messages then
wait in ZeroMQ's queues and in the workers (back-pressure; each worker says so). Nothing is dropped.

Usage::

    queue = IngestQueue(take)            # take(client_id, payload) writes one payload
    queue.start()                        # the writing greenlet (a test may call drain() instead)
    queue.put(client_id, payload)        # from a message handler
    queue.flush()                        # before the run's last files: everything, now
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import gevent
from gevent.event import Event

from llmload.files import COL
from llmload.net.turns import let_io_run

log = logging.getLogger("llmload")

BEHIND_S = 5.0
"""A payload that waited this long: the master is behind its workers (said once per episode)."""
MAX_QUEUED_ROWS = 500_000
"""Rows queued at most (~0.5 GB); past it the master stops reading until the queue has room."""
SLICE_ROWS = 200  # rows written per payload taken (a final's thousands are split)
TURN_S = 0.005  # work between pauses for the loop (heartbeats, the web UI)


class ArrivalLag:
    """How late the workers' rows reach the master, read from the rows themselves. Pure.

    A worker stamps each row's start and E2E; the master reads the payload later by the shipping
    cadence (every ``links.ROWS_SHIP_S``), the network, the two clocks' offset, and any time the
    payload waited unread in ZeroMQ's buffers. The first three are steady, so a worker's least
    lateness so far is its baseline, and what its rows come later than that is time they waited
    unread. A master past its capacity shows it here before its own queue does: it checks each
    payload as it reads it, so at its limit the backlog stays in the sockets (at 100,000 rows/s
    from 16 workers it took 70,000 a second, and its queue never held a payload for 5 s)."""

    def __init__(self) -> None:
        self._baseline: dict[str, float] = {}  # worker → its least lateness so far (offset, cadence, trip)
        self.last_s = 0.0
        """The lateness beyond its worker's baseline of the payload seen last."""

    def seen(self, client_id: str, row: Any, now: float) -> float:
        """A payload of ``client_id`` whose newest row is ``row`` (positional, REQUESTS_COLUMNS order)
        arrived at ``now`` (Unix seconds); returns how late it came beyond the worker's baseline."""
        try:
            start, e2e = row[COL.start_time], row[COL.e2e_ms]
            end = float(start) + (float(e2e) / 1000.0 if e2e is not None else 0.0)
        except (TypeError, ValueError, IndexError):
            return self.last_s  # a row without times (the gate let its cells be empty): nothing to read
        if end != end:  # NaN
            return self.last_s
        late = now - end
        base = self._baseline[client_id] = min(self._baseline.get(client_id, late), late)
        self.last_s = late - base
        return self.last_s


class IngestQueue:
    def __init__(self, take: Callable[[str, dict[str, Any]], None],
                 clock: Callable[[], float] = time.monotonic, wall: Callable[[], float] = time.time) -> None:
        self._take = take
        self._clock = clock
        self._wall = wall
        self.arrival = ArrivalLag()  # how late the rows come: the backlog in the sockets
        self._queues: dict[str, deque[tuple[float, dict[str, Any]]]] = {}  # worker → (queued at, payload)
        self._order: deque[str] = deque()  # workers with payloads queued, in the order they are served
        self.rows = 0  # rows queued now
        self.payloads = 0
        self.peak_rows = 0
        self.worst_wait_s = 0.0  # the longest a payload waited (this run)
        self._behind_since: float | None = None
        self._wake = Event()
        self._greenlet: gevent.Greenlet | None = None
        self.failed: set[str] = set()  # workers one of whose payloads could not be written (said once each)

    def start(self) -> None:
        if self._greenlet is None or self._greenlet.dead:
            self._greenlet = gevent.spawn(self._run)

    def stop(self) -> None:
        if self._greenlet is not None:
            self._greenlet.kill(block=False)
            self._greenlet = None

    def put(self, client_id: str, payload: dict[str, Any]) -> None:
        rows = payload.get("rows") or []
        q = self._queues.get(client_id)
        if q is None:
            q = self._queues[client_id] = deque()
            self._order.append(client_id)
        now = self._clock()
        if rows:
            self.arrival.seen(client_id, rows[-1], self._wall())  # rows are shipped in the order they ended
        if len(rows) > SLICE_ROWS:  # a final's rows: in slices, so one worker's thousands do not hold the loop
            q.append((now, {**payload, "rows": rows[:SLICE_ROWS]}))
            for i in range(SLICE_ROWS, len(rows), SLICE_ROWS):
                q.append((now, {"rows": rows[i:i + SLICE_ROWS]}))
            self.payloads += (len(rows) - 1) // SLICE_ROWS
        else:
            q.append((now, payload))
        self.payloads += 1
        self.rows += len(rows)
        self.peak_rows = max(self.peak_rows, self.rows)
        self._wake.set()

    def full(self) -> bool:
        return self.rows >= MAX_QUEUED_ROWS

    def oldest_wait_s(self) -> float:
        now = self._clock()
        return max((now - q[0][0] for q in self._queues.values() if q), default=0.0)

    def drain(self, budget_s: float = float("inf")) -> None:
        """Take payloads, one of each worker in turn, until the queue is empty or ``budget_s`` has passed."""
        t_end = time.perf_counter() + budget_s
        order, queues = self._order, self._queues
        while order:
            client_id = order.popleft()
            q = queues[client_id]
            queued_at, payload = q.popleft()
            if q:
                order.append(client_id)  # its next payload after every other worker's
            else:
                del queues[client_id]
            self.payloads -= 1
            self.rows -= len(payload.get("rows") or ())
            self.worst_wait_s = max(self.worst_wait_s, self._clock() - queued_at)
            try:
                self._take(client_id, payload)
            except Exception:  # one payload that cannot be written costs no other
                if client_id not in self.failed:
                    self.failed.add(client_id)
                    log.exception("llmload: a payload of worker %s could not be written; its other payloads "
                                  "still are", client_id)
            if time.perf_counter() >= t_end:
                return

    def flush(self) -> None:
        self.drain()
        self._check_behind(everything_written=True)
        self.arrival.last_s = 0.0  # every row that came late is written: none waits now

    def _run(self) -> None:
        while True:
            self._wake.wait()
            self._wake.clear()
            while self.payloads:
                self.drain(TURN_S)
                self._check_behind()
                let_io_run()  # the loop reads the socket and answers heartbeats between turns
            self._check_behind()

    def _check_behind(self, everything_written: bool = False) -> None:
        wait, late = self.oldest_wait_s(), 0.0 if everything_written else self.arrival.last_s
        if max(wait, late) >= BEHIND_S and self._behind_since is None:
            self._behind_since = self._clock()
            log.warning("llmload: the master is behind its workers: rows reach it %.0f s later than they used to, "
                        "and %d rows from %d workers wait to be written, the oldest for %.0f s (it takes rows more "
                        "slowly than they come; the rest wait in ZeroMQ's buffers; see docs/distributed.md, how many "
                        "workers per master); none is dropped", late, self.rows, len(self._queues), wait)
        elif self._behind_since is not None and not self.payloads and late < 1.0:
            log.warning("llmload: the master has caught up with its workers after %.0f s behind (at most %d rows "
                        "waited)", self._clock() - self._behind_since, self.peak_rows)
            self._behind_since = None
