"""The master's end of Locust's ZeroMQ channel: what may reach a handler at all (issue 35).

Locust's master reads every frame on its port and hands it to its handlers unchecked. A frame
msgpack cannot read, or whose tuple is not ``(type, data, node_id)``, raises inside its receive
loop and ends it: the master hears nothing more. A message's ``node_id`` is whatever its sender
wrote, so anyone could speak as a worker. A process that never joined may send any message type,
and Locust's handlers index the payload blindly (``msg.data["state"]``). The guard, installed on
the master at init:

* reads each frame itself and drops one that is not a Locust message, or whose node id is not the
  ZeroMQ identity it came from;
* lets a process that has not joined (never sent ``client_ready``) send only its join messages
  (:data:`~llmload.plugin.cluster.messages.JOIN_MESSAGES`);
* checks Locust's own messages against :data:`~llmload.plugin.cluster.messages.LOCUST_SHAPES` (llmload's
  are checked by their handlers: :class:`llmload.plugin.cluster.membership.Gate`);
* keeps the receive loop alive whatever a handler raises;
* lets the loop run after each ``RECV_TURN_S`` of reading without a pause: ZeroMQ's green socket
  returns a waiting message without yielding, so a worker that floods the port kept the receive
  loop busy for as long as its messages came, and the queue's writer (every worker's rows), the
  heartbeats and the live view waited behind it (issue 35);
* caps one message at :data:`MAX_MESSAGE_BYTES` (ZeroMQ drops the connection of a peer that sends
  more, before the master holds it);
* says each refusal in one line, once per sender, and counts the rest.

Usage::

    guard = ChannelGuard(runner)        # a MasterRunner, at init
    guard.joined                        # node ids that sent client_ready
    guard.dropped                     # sender → (messages refused, why), for the summary
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from time import perf_counter
from typing import Any

import gevent
import zmq
from locust.exception import RPCError
from locust.rpc import Message

from llmload.net.turns import let_io_run
from llmload.plugin.cluster.messages import JOIN_MESSAGES, LOCUST_SHAPES
from llmload.plugin.cluster.schema import Invalid, shown

log = logging.getLogger("llmload")

MAX_MESSAGE_BYTES = 256 << 20
"""A worker's biggest honest message (its final rows) is far below this; 64 MiB fields still arrive
and are refused by their shape, with the reason."""
HOLD_S = 0.05
RECV_TURN_S = 0.005
"""Reading and handling messages this long without a pause: the loop runs (the writer, the heartbeats)."""
WAITED_S = 0.0005  # a read that took this long waited for its message: the loop ran meanwhile
MAX_NAMED = 100
"""Senders named in the log at most; past that, refusals are only counted (a flood of identities
cannot fill the log or the memory)."""


def read_frames(frames: list[bytes]) -> tuple[str, Any, str]:
    """``(sender, message, why)`` for one ROUTER read; ``why`` is '' for a Locust message that its
    sender's own identity signed (the node id it carries is the ZeroMQ identity it came from)."""
    try:
        sender = frames[0].decode("utf-8")
    except (IndexError, UnicodeDecodeError):
        return (shown(frames[0]) if frames else "?"), None, "an identity that is not text"
    if len(frames) != 2:
        return sender, None, f"{len(frames)} frames, not a Locust message"
    try:
        msg = Message.unserialize(frames[1])
    except Exception as e:  # msgpack's errors, a tuple of the wrong length, a bad datetime: all one thing here
        return sender, None, f"not a Locust message ({type(e).__name__}: {shown(str(e))})"
    if type(msg.type) is not str or type(msg.node_id) is not str:
        return sender, None, f"not a Locust message (type {shown(msg.type)}, node id {shown(msg.node_id)})"
    if msg.node_id != sender:
        return sender, None, f"it speaks as {shown(msg.node_id)}"
    return sender, msg, ""


class ChannelGuard:
    def __init__(self, runner: Any, hold: Callable[[], bool] = lambda: False) -> None:
        self.runner = runner
        self._hold = hold  # while true, read nothing more: the master's queue is full (back-pressure)
        self.joined: set[str] = set()
        self.dropped: dict[str, list] = {}  # sender → [messages refused, the first reason]
        self._busy_since = perf_counter()  # when the receive loop last let the others run
        server = runner.server
        self._socket = server.socket
        try:
            self._socket.setsockopt(zmq.MAXMSGSIZE, MAX_MESSAGE_BYTES)
        except zmq.ZMQError:  # a socket closed already (the master quitting): nothing to guard
            pass
        server.recv_from_client = self.recv_from_client  # Locust's client_listener calls these two
        self._handle = runner.handle_message
        runner.handle_message = self.handle_message

    def refuse(self, sender: str, why: str, kind: str = "") -> None:
        """Drop one message; the first from each sender is named in the log with ``why``."""
        seen = self.dropped.get(sender)
        if seen is not None:
            seen[0] += 1
            return
        if len(self.dropped) >= MAX_NAMED:
            self.dropped.setdefault("(others)", [0, f"senders past the first {MAX_NAMED}, not named"])[0] += 1
            return
        self.dropped[sender] = [1, why]
        log.error("llmload: refused %s from %s: %s (said once per sender; its other refused messages are counted)",
                  kind or "a message", sender, why)

    def recv_from_client(self) -> tuple[str, Any]:
        """Locust's ``Server.recv_from_client``: the next message that may be handled."""
        while True:
            while self._hold():
                gevent.sleep(HOLD_S)
            asked = perf_counter()
            if asked - self._busy_since >= RECV_TURN_S:
                let_io_run()
                asked = perf_counter()
                self._busy_since = asked
            try:
                frames = self._socket.recv_multipart()
            except zmq.ZMQError as e:
                raise RPCError("ZMQ network broken") from e
            if perf_counter() - asked >= WAITED_S:
                self._busy_since = perf_counter()
            sender, msg, why = read_frames(frames)
            if why:
                self.refuse(sender, why)
                continue
            if sender not in self.joined and msg.type not in JOIN_MESSAGES:
                self.refuse(sender, "it never joined this run (no client_ready)", msg.type)
                continue
            shape = LOCUST_SHAPES.get(msg.type)
            if shape is not None:
                try:
                    shape.check(msg.data)
                except Invalid as e:
                    self.refuse(sender, f"Locust's {msg.type} message: {e}", msg.type)
                    continue
            if msg.type == "client_ready":
                self.joined.add(sender)
            return sender, msg

    def handle_message(self, client_id: str, msg: Any) -> None:
        try:
            self._handle(client_id, msg)
        except Exception as e:  # a handler that broke on a payload must not end the receive loop
            self.refuse(client_id, f"its {msg.type} message broke a handler ({type(e).__name__}: {shown(str(e))})",
                        msg.type)
