"""Distributed runs: every worker's rows and stats reach the master, and none is lost at stop.

The messages and their fields are declared in :mod:`llmload.plugin.cluster.messages`.

Workers send their rows in small messages (``llmload_rows``, ``ROWS_PER_MESSAGE`` at most, every
``ROWS_SHIP_S``: packing three seconds of rows at once held a worker's loop for ~5 ms at 1,024
streams), their stats and health every ``WORKER_REPORT_S`` (``llmload_report``; no longer inside
Locust's own report, whose send gives up on a full queue and loses what it carries), and their own
user count on every change (``llmload_users``). Every message goes through the worker's
:class:`~llmload.plugin.cluster.outbox.Outbox` (kept until ZeroMQ takes it, never dropped).

The master checks each message (:class:`~llmload.plugin.cluster.membership.Gate`) and only queues it: one
greenlet writes the queue, fairly between workers (:class:`~llmload.plugin.cluster.ingest_queue.IngestQueue`),
so the loop that answers heartbeats never waits on the CSV.

Not losing rows at stop (docs/architecture.md#not-losing-rows-at-stop): after ``-t`` expires the master stops listening
0.5 s after it tells workers to quit, while they may still be finishing streams. So the master, in
its ``test_stop``, asks every worker that has not yet sent its final data to stop
(``llmload_stop``); a worker's ``test_stop`` (its users are done then) sends ``llmload_final``
with everything left; the master waits for every worker's final message, bounded by the stop
timeout plus a margin, before it writes the summary.

Only the master knows the total user count, and only from what workers tell it:
:class:`UserCounts` turns those reports into the ``users`` of each row (and the master passes every
worker's count on, so a worker's own file carries the same totals).

Faults (issue 15):

* A worker announces every request id to the master before the request is written
  (``llmload_sent``); a row removes it. A worker that vanishes (SIGKILL, a cable cut for good)
  leaves ids without rows: :meth:`MasterLink.lost` says whose and how many, exactly the requests
  the server saw that have no row on the master.
* A worker that hears no heartbeat from its master for ``--master-lost-after`` seconds (default
  20; a 10-s partition passes) stops its users, keeps every row in its own file and exits 1
  (:meth:`WorkerLink.watch_master`). Rows go to that file as they are shipped.
* At the end the master waits for the final data of live workers, but gives up on a worker that
  Locust calls missing (or has dropped) once it has also been silent for ``GONE_AFTER_SILENT_S``,
  counted from its last message of any kind (a heartbeat, rows, an announced request), never less
  than ``MISSING_GRACE_S`` after asking. Locust's "missing" alone only means ~4 s without a heartbeat:
  a worker on a loaded machine (its loop held up, or the process not scheduled) shows that and still
  sends its final data seconds later; a worker killed during the run has been silent far longer.

Usage::

    link = WorkerLink(runner, take_report, stop, rows)   # on a worker; take_report() -> dict
    link = MasterLink(runner, ingest, gate=gate)  # on the master; ingest(client_id, payload)
    link.collect_finals(stop_timeout)            # master, in test_stop
    link.lost()                                  # master: [(index, client_id, ids without a row)]
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import gevent
from locust.rpc import Message

from llmload.net.turns import let_io_run
from llmload.plugin.cluster.messages import (
    COUNTS,
    FINAL,
    FINAL_ROWS_ONLY,
    PROTOCOL_VERSION,
    REPORT,
    ROWS,
    ROWS_PER_MESSAGE,
    SENT,
    STOP,
    USERS,
    MessageType,
)
from llmload.plugin.cluster.outbox import Outbox
from llmload.plugin.cluster.user_counts import UserCounts

log = logging.getLogger("llmload")

MASTER_CHECK_S = 0.5
WORKER_REPORT_S = 3.0  # Locust's WORKER_REPORT_INTERVAL
USERS_SAMPLE_S = 0.1
ROWS_SHIP_S = 0.5
FINAL_SEND_S = 10.0  # a worker's last messages wait this long at most for room in the queue to its master
_NOBLOCK = 1  # zmq.NOBLOCK, without importing zmq here


class WorkerLink:
    """A worker's side: ships rows and reports through its outbox, its user count on change, the final rows."""

    def __init__(self, runner: Any, take_report: Callable[[], dict[str, Any]], on_stop_request: Callable[[], None],
                 rows: list, on_shipped: Callable[[list], None] = lambda rows: None, token: str = "") -> None:
        self.runner = runner
        self.token = token  # --cluster-token: shown to the master with every payload
        self._take_report = take_report
        self.rows = rows  # the plugin's queue of rows not yet sent (the link only takes from its head)
        self._on_shipped = on_shipped  # the worker keeps what it sent on its own disk
        self._on_stop_request = on_stop_request
        self.outbox = Outbox(runner, on_sent=self._sent)
        runner.register_message(STOP.name, self._on_stop, concurrent=True)
        runner.register_message(COUNTS.name, self._on_counts)
        self.others = UserCounts()  # every other worker's user count, as the master passes them on
        self.announce_failures = 0

    def _sent(self, message: MessageType, payload: Any) -> None:
        if message is ROWS:
            self._on_shipped(payload["rows"])

    def _on_stop(self, environment: Any, msg: Any, **_kw: Any) -> None:
        try:
            self._on_stop_request()
        except Exception:
            # the final data goes out only from test_stop: a stop that failed half-way must still send it
            log.exception("llmload: stopping this worker failed; sending its final data anyway")
            self.send_final()

    def _on_counts(self, environment: Any, msg: Any, **_kw: Any) -> None:
        if (why := COUNTS.refusal(msg.data)):
            log.error("llmload: refused a %s message from the master: %s", COUNTS.name, why)
            return
        me = self.runner.client_id
        t = float(msg.data["t"])
        for client_id, n in msg.data["counts"].items():
            if client_id != me:
                self.others.report(client_id, t, int(n))

    def announce(self, request_id: str) -> None:
        """Tell the master a request is about to be written. Non-blocking: a full queue (a long
        partition) must not stall the user; the master then cannot count that request as lost."""
        runner = self.runner
        try:
            runner.client.socket.send(Message(SENT.name, request_id, runner.client_id).serialize(),
                                      _NOBLOCK)
        except Exception:
            self.announce_failures += 1

    def watch_master(self, lost_after_s: float, on_lost: Callable[[float], None]) -> None:
        """Run in a greenlet: ``on_lost(silence_s)`` once no heartbeat came for ``lost_after_s``."""
        while True:
            gevent.sleep(MASTER_CHECK_S)
            last = self.runner.last_heartbeat_timestamp
            if last is not None and time.time() - last > lost_after_s:
                on_lost(time.time() - last)
                return

    def report_users(self) -> None:
        """Run in a greenlet: send this worker's user count whenever it changes."""
        last = -1
        while True:
            n = self.runner.user_count
            if n != last:
                self.outbox.put(USERS, USERS.payload(t=time.time(), n=n, token=self.token, version=PROTOCOL_VERSION))
                self.outbox.send()
                last = n
            gevent.sleep(USERS_SAMPLE_S)

    def _queue_rows(self) -> None:
        while self.rows:
            rows = self.rows[:ROWS_PER_MESSAGE]
            self.outbox.put(ROWS, ROWS.payload(rows=rows, token=self.token, version=PROTOCOL_VERSION))
            del self.rows[:len(rows)]  # in the outbox now: it keeps them until ZeroMQ takes them
            self.outbox.send()
            let_io_run()

    def ship_rows(self) -> None:
        """Run in a greenlet: the rows queued so far, a small message per loop turn; the stats and
        health every WORKER_REPORT_S."""
        last_report = time.monotonic()
        while True:
            gevent.sleep(ROWS_SHIP_S)
            self._queue_rows()
            if time.monotonic() - last_report >= WORKER_REPORT_S:
                last_report = time.monotonic()
                self.outbox.put(REPORT, self._take_report())
            self.outbox.send()

    def send_final(self) -> None:
        """The last payload; always sent, even when part of it cannot be made: without it the master
        writes this worker off as lost. What still waits in the outbox goes first."""
        try:
            payload = self._take_report()
        except Exception as e:
            log.exception("llmload: this worker's final stats could not be made; sending its rows alone")
            payload = FINAL_ROWS_ONLY.payload(rows=[], error=f"{type(e).__name__}: {e}", token=self.token,
                                              version=PROTOCOL_VERSION, final=True)
        rows = self.rows[:]
        del self.rows[:]
        self._on_shipped(rows)  # its own copy now: the master may be gone
        payload["rows"] = rows
        payload["final"] = True
        try:
            self.outbox.put(FINAL, payload)
        except Exception as e:  # a payload msgpack cannot carry: the rows alone still go
            log.exception("llmload: this worker's final payload cannot be sent; sending its rows alone")
            self.outbox.put(FINAL, FINAL_ROWS_ONLY.payload(rows=rows, error=f"{type(e).__name__}: {e}",
                                                           token=self.token, version=PROTOCOL_VERSION, final=True))
        if not self.outbox.send_all(FINAL_SEND_S):
            for message, waiting in self.outbox.waiting():
                if message is ROWS:
                    self._on_shipped(waiting["rows"])
            log.error("llmload: could not send the final rows to the master (%d messages with %d rows still wait "
                      "after %.0f s: the master is gone or its queue stays full); this worker's own file has them",
                      len(self.outbox), self.outbox.rows_waiting, FINAL_SEND_S)
