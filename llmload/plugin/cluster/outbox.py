"""A worker's messages to its master: sent without waiting, in order, and never dropped (issue 35).

Locust's ``send_message`` on a worker tries a non-blocking send and, while ZeroMQ's queue to the
master is full, sleeps 1, 3 and 5 s and then raises: the caller has lost the message (llmload's rows
in Locust's 3-s report were lost that way when a master fell behind, with no word of it). The outbox
keeps each message, serialized once, until ZeroMQ has taken it, and sends them in order. A master
that takes messages more slowly than this worker makes them leaves them waiting here: said in one
line once the oldest has waited ``BEHIND_S``, and again when they have gone.

Usage::

    box = Outbox(runner, on_sent)        # on_sent(message, payload) once ZeroMQ has taken it
    box.put(messages.ROWS, payload)
    box.send()                           # what the socket takes now; True when nothing waits
    box.send_all(10.0)                   # at stop: wait (bounded) for the rest to go
"""

from __future__ import annotations

import logging
import time
from collections import deque
from collections.abc import Callable
from typing import Any

import gevent
import zmq
from locust.rpc import Message

from llmload.plugin.cluster.messages import MessageType

log = logging.getLogger("llmload")

BEHIND_S = 5.0
RETRY_S = 0.05


class Outbox:
    def __init__(self, runner: Any, on_sent: Callable[[MessageType, Any], None] = lambda m, p: None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.runner = runner
        self._on_sent = on_sent
        self._clock = clock
        self._pending: deque[tuple[float, MessageType, Any, bytes]] = deque()
        self.rows_waiting = 0
        self.errors = 0  # sends that failed otherwise than on a full queue (a socket being reset)
        self._behind_since: float | None = None
        self._most_waiting = 0

    def __len__(self) -> int:
        return len(self._pending)

    def put(self, message: MessageType, payload: Any) -> None:
        data = Message(message.name, payload, getattr(self.runner, "client_id", "")).serialize()
        self._pending.append((self._clock(), message, payload, data))
        self.rows_waiting += _rows(payload)

    def send(self) -> bool:
        """Hand ZeroMQ every waiting message it takes now, oldest first; True when none is left."""
        pending = self._pending
        while pending:
            _, message, payload, data = pending[0]
            if not self._send_now(message, payload, data):
                break
            pending.popleft()
            self.rows_waiting -= _rows(payload)
            self._on_sent(message, payload)
        self._check_behind()
        return not pending

    def send_all(self, within_s: float) -> bool:
        """Keep sending until nothing waits or ``within_s`` has passed; True when all went."""
        t_end = self._clock() + within_s
        while not self.send():
            if self._clock() >= t_end:
                return False
            gevent.sleep(RETRY_S)
        return True

    def waiting(self) -> list[tuple[MessageType, Any]]:
        """What ZeroMQ has not taken yet, oldest first."""
        return [(m, p) for _, m, p, _ in self._pending]

    def _send_now(self, message: MessageType, payload: Any, data: bytes) -> bool:
        client = getattr(self.runner, "client", None)
        if client is None:  # a runner without a ZeroMQ client (tests): its own send_message
            self.runner.send_message(message.name, payload)
            return True
        try:
            client.socket.send(data, zmq.NOBLOCK)
        except zmq.Again:  # the queue to the master is full: keep it for the next try
            return False
        except Exception:  # the socket is being reset (Locust reconnects): the same, counted
            self.errors += 1
            return False
        return True

    def _check_behind(self) -> None:
        pending = self._pending
        self._most_waiting = max(self._most_waiting, self.rows_waiting)
        if pending and self._behind_since is None and self._clock() - pending[0][0] >= BEHIND_S:
            self._behind_since = self._clock()
            log.warning("llmload: the master is not taking this worker's messages as fast as they come (ZeroMQ's "
                        "queue to it is full): %d messages with %d rows wait here, none is dropped", len(pending),
                        self.rows_waiting)
        elif not pending and self._behind_since is not None:
            log.warning("llmload: this worker's waiting messages have all reached the master, after %.0f s (at most "
                        "%d rows waited)", self._clock() - self._behind_since, self._most_waiting)
            self._behind_since = None
            self._most_waiting = 0


def _rows(payload: Any) -> int:
    return len(payload.get("rows") or ()) if isinstance(payload, dict) else 0
