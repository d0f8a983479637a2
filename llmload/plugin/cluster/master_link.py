"""The master's side of a distributed run (:class:`MasterLink`): every worker's rows and stats taken
in, the run's user counts passed on, every worker's final data waited for at stop, and the workers
that vanished named with the requests they left without a row (see
:mod:`llmload.plugin.cluster.links` for the protocol and the faults).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import gevent

from llmload.plugin.cluster.ingest_queue import IngestQueue
from llmload.plugin.cluster.membership import Gate
from llmload.plugin.cluster.messages import (
    COUNTS,
    FINAL,
    PROCESSES,
    REPORT,
    REPORT_KEY,
    ROWS,
    SENT,
    STOP,
    USERS,
    MessageType,
)
from llmload.plugin.cluster.user_counts import UserCounts

log = logging.getLogger("llmload")

FINAL_MARGIN_S = 15.0
MISSING_GRACE_S = 2.0
GONE_AFTER_SILENT_S = 12.0  # > the 8 s a worker starved of CPU was seen silent for, then answered
MASTER_OVERSLEPT_S = 1.0  # a 0.05-s sleep that took longer: this process itself was starved
COUNTS_EVERY_S = 0.5


class MasterLink:
    """The master's side: checks and queues every worker's payloads, knows who sent its final data,
    and which announced requests have no row yet."""

    def __init__(self, runner: Any, ingest: Callable[[str, dict[str, Any]], None],
                 run_info: Callable[[], dict[str, Any]] = dict, gate: Gate | None = None) -> None:
        self.runner = runner
        self.queue = IngestQueue(ingest)  # written by its own greenlet once started (start_writing)
        self._run_info = run_info
        self.gate = gate if gate is not None else Gate()
        self.users = UserCounts()
        self.expected: set[str] = set()
        self.finals: set[str] = set()
        runner.environment.events.worker_report.add_listener(self._on_locust_report)
        runner.environment.events.heartbeat_sent.add_listener(self._on_heartbeat)  # fired as one arrives
        self.unreported: dict[str, set[str]] = {}  # worker → announced request ids without a row
        self.clock: Callable[[], float] = time.monotonic  # a test passes a fake clock and sleep
        self.sleep: Callable[[float], None] = gevent.sleep
        self.last_heard: dict[str, float] = {}  # worker → clock() of its last message of any kind
        self.index: dict[str, int] = {}
        self._counts: dict[str, int] = {}
        self._counts_t = 0.0
        self._counts_pending: gevent.Greenlet | None = None
        runner.register_message(FINAL.name, self._on_final)
        runner.register_message(USERS.name, self._on_users)
        runner.register_message(SENT.name, self._on_sent)
        runner.register_message(ROWS.name, self._on_rows)
        runner.register_message(REPORT.name, self._on_report)

    @property
    def refused(self) -> dict[str, str]:
        """Workers refused whole (no token, another protocol version): never waited for, never counted."""
        return self.gate.refused

    def start(self) -> None:
        """At test start: expect a final message from every connected worker."""
        self.finals = set()
        self.users.clear()
        self.unreported = {}
        self._counts = {}
        self.expected = set(self.runner.clients.keys()) - set(self.refused)
        now = self.clock()
        self.last_heard = dict.fromkeys(self.expected, now)

    def heard(self, client_id: str) -> None:
        self.last_heard[client_id] = self.clock()

    def _on_heartbeat(self, client_id: str, **_kw: Any) -> None:
        self.heard(client_id)

    def admits(self, client_id: str, message: MessageType, payload: Any) -> bool:
        if self.gate.admits(client_id, message, payload):
            return True
        if client_id in self.refused:
            self.expected.discard(client_id)
            self.unreported.pop(client_id, None)
        return False

    def _on_sent(self, environment: Any, msg: Any, **_kw: Any) -> None:
        self.heard(msg.node_id)
        if self.admits(msg.node_id, SENT, msg.data):
            self.unreported.setdefault(msg.node_id, set()).add(msg.data)

    def _rows_arrived(self, client_id: str, rows: list) -> None:
        ids = self.unreported.get(client_id)
        if ids:
            for row in rows:
                ids.discard(row[0])

    def broadcast(self, name: str, data: Any) -> None:
        for client_id in list(self.runner.clients.keys()):
            self.runner.send_message(name, data, client_id=client_id)

    def _take(self, client_id: str, payload: dict[str, Any]) -> None:
        """A payload that passed the gate: its requests have rows now; queued for writing."""
        self.expected.add(client_id)
        self._rows_arrived(client_id, payload.get("rows") or ())
        self.queue.put(client_id, payload)

    def _known_index(self, client_id: str, payload: dict[str, Any]) -> None:
        index = self.gate.index_of(client_id)
        self.index[client_id] = index if index is not None else payload.get("index", "?")

    def _on_locust_report(self, client_id: str, data: dict[str, Any]) -> None:
        self.heard(client_id)
        if REPORT_KEY in data:  # llmload of protocol 3 or older put its report here: refused, and said why
            self.admits(client_id, REPORT, data[REPORT_KEY])

    def _on_report(self, environment: Any, msg: Any, **_kw: Any) -> None:
        self.heard(msg.node_id)
        if self.admits(msg.node_id, REPORT, msg.data):
            self._known_index(msg.node_id, msg.data)
            self._take(msg.node_id, msg.data)

    def _on_users(self, environment: Any, msg: Any, **_kw: Any) -> None:
        self.heard(msg.node_id)
        if not self.admits(msg.node_id, USERS, msg.data):
            return
        t, n = float(msg.data["t"]), int(msg.data["n"])
        self.users.report(msg.node_id, t, n)
        if msg.node_id not in self._counts:  # a worker's first word in this run (also one that joined late)
            self.expected.add(msg.node_id)
            self.broadcast(PROCESSES.name, self._run_info())
        self._counts[msg.node_id] = n
        self._counts_t = max(self._counts_t, t)
        if self._counts_pending is None:  # at most one broadcast per COUNTS_EVERY_S: ramps change counts often
            self._counts_pending = gevent.spawn_later(COUNTS_EVERY_S, self._send_counts)

    def _send_counts(self) -> None:
        self._counts_pending = None
        self.broadcast(COUNTS.name, COUNTS.payload(t=self._counts_t, counts=dict(self._counts)))

    def _on_rows(self, environment: Any, msg: Any, **_kw: Any) -> None:
        self.heard(msg.node_id)
        if self.admits(msg.node_id, ROWS, msg.data):
            self._take(msg.node_id, msg.data)

    def _on_final(self, environment: Any, msg: Any, **_kw: Any) -> None:
        client_id, data = msg.node_id, msg.data
        self.heard(client_id)
        taken = self.admits(client_id, FINAL, data)
        if client_id in self.refused:
            return
        self.finals.add(client_id)  # it has said its last word, even if what it said is refused or fails below
        self.expected.add(client_id)
        if not taken:
            return
        self._known_index(client_id, data)
        if data.get("error"):
            log.error("llmload: worker %s (index %s) sent its rows without its final stats: %s", client_id,
                      self.index[client_id], data["error"])
        self._take(client_id, data)

    def collect_finals(self, stop_timeout: float) -> None:
        """Ask every worker without final data to stop, and wait (bounded) for their finals."""
        for client_id in self.expected - self.finals:
            try:
                self.runner.send_message(STOP.name, None, client_id=client_id)
            except Exception as e:
                log.warning("llmload: cannot ask worker %s to stop: %s", client_id, e)
        start = last_turn = self.clock()
        deadline = start + stop_timeout + FINAL_MARGIN_S
        why = f"the stop timeout plus {FINAL_MARGIN_S:.0f} s passed"
        while (waiting := self.expected - self.finals) and (now := self.clock()) < deadline:
            if now - last_turn > MASTER_OVERSLEPT_S:
                # This process was not running (the machine was loaded): its workers' messages sit unread
                # in the socket, so that time is not their silence.
                self._excuse(now - last_turn)
                deadline += now - last_turn
            last_turn = now
            # Locust's "missing" is ~4 s without a heartbeat, which a live worker on a loaded machine
            # shows too: it is gone only when also silent for GONE_AFTER_SILENT_S since its last message.
            if now - start > MISSING_GRACE_S and all(self._gone(c, now) for c in waiting):
                why = f"silent for {GONE_AFTER_SILENT_S:.0f} s or more"
                break
            self.sleep(0.05)
        now = self.clock()
        for client_id in self.expected - self.finals:
            node = self.runner.clients.get(client_id)
            log.warning("llmload: no final data from worker %s (index %s) after %.1f s (%s; last heard %.1f s ago, "
                        "Locust calls it %s); rows it had not yet reported are missing", client_id,
                        self.index.get(client_id, "?"), now - start, why,
                        now - self.last_heard.get(client_id, start), node.state if node is not None else "gone")

    def _excuse(self, seconds: float) -> None:
        for client_id in self.last_heard:
            self.last_heard[client_id] += seconds

    def _gone(self, client_id: str, now: float) -> bool:
        node = self.runner.clients.get(client_id)
        if node is not None and node.state != "missing":
            return False
        return now - self.last_heard.get(client_id, float("-inf")) >= GONE_AFTER_SILENT_S

    def lost(self) -> list[tuple[int | str, str, int]]:
        """Workers with announced requests that have no row, or no final data:
        ``(index, client_id, requests without a row)``; empty when nothing is missing."""
        out = []
        for client_id in sorted(self.expected | set(self.unreported)):
            n = len(self.unreported.get(client_id, ()))
            if n or client_id not in self.finals:
                out.append((self.index.get(client_id, "?"), client_id, n))
        return out
