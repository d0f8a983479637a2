"""The part a Locust process plays in a run, one object per role behind one interface (as Locust's
``LocalRunner``/``MasterRunner``/``WorkerRunner``; the interface: :mod:`llmload.plugin.cluster.role`):
callers ask the role, never which role it is.

* :class:`LocalRole`: generates the load and writes the run's files. :meth:`Role.send` loops a
  message back to this process's own handler (as ``LocalRunner.send_message``), so the trace
  clock, the rate ladder and "every trace request is sent" take the same path as in a
  distributed run.
* :class:`MasterRole`: writes the files from every worker's rows
  (:class:`~llmload.plugin.cluster.master_link.MasterLink`), sends master→worker messages to every
  worker, waits for their final rows at stop.
* :class:`~llmload.plugin.cluster.worker_role.WorkerRole` (its own module): generates the load, ships rows
  and stats to the master, keeps its own copy of its rows, stops itself when the master is lost.

The end of a run on the master or a local process (:meth:`Role.finish_run`): rows still
queued, ``PREFIX_llm_stats.csv``, the history's last row, the summary, exit code 1 when a
worker vanished with rows the master never got, or the master refused a message of a worker of
the run (what it said is not in the files). SIGTERM or Ctrl-C mid-run quits Locust without
stopping the test first (:meth:`Role.quitting` stops it the normal way first, so every final row
arrives before the files close).

Usage (from :class:`llmload.plugin.wiring.LLMLoadPlugin`)::

    role = make_role(plugin)                                     # llmload.plugin.cluster.role_for
    role.handle(messages.RATE, lambda data, node_id: ...)
    role.send(messages.RATE, messages.RATE.payload(rate=4.0))   # to whoever handles it
    role.start(); role.stop(); role.quitting()
"""

from __future__ import annotations

import logging
import time
from typing import Any

import gevent

from llmload.files import COL
from llmload.net.turns import let_io_run
from llmload.plugin.cluster import messages
from llmload.plugin.cluster.channel_guard import ChannelGuard
from llmload.plugin.cluster.master_link import MasterLink
from llmload.plugin.cluster.membership import Gate, cluster_token
from llmload.plugin.cluster.messages import MASTER_TO_WORKER, MessageType
from llmload.plugin.cluster.role import Handler, Role
from llmload.plugin.cluster.worker_copies import master_csv
from llmload.plugin.options.shipped_options import send_without_secrets
from llmload.plugin.run.run_parts import RunParts

log = logging.getLogger("llmload")

LOCAL_FLUSH_S = 1.0
ROWS_PER_SLICE = 100  # rows written per loop turn (~0.5 ms at 1,024 streams)
_USERS_COL = COL.users


class LocalRole(Role):
    name = "local"
    leads = True
    generates_load = True

    def __init__(self, parts: RunParts) -> None:
        super().__init__(parts)
        self._handlers: dict[str, Handler] = {}

    def handle(self, message: MessageType, handler: Handler, concurrent: bool = False) -> None:
        self._handlers[message.name] = handler

    def send(self, message: MessageType, data: Any) -> None:
        handler = self._handlers.get(message.name)  # loops back, as Locust's LocalRunner.send_message
        if handler is not None:
            handler(data, "local")

    def load_processes(self) -> set[str]:
        return {"local"}

    def live_lag_s(self) -> float:
        return LOCAL_FLUSH_S + 1.0

    def start(self) -> None:
        self.spawn(self._flush_forever)

    def _flush_forever(self) -> None:
        # A slice of rows per loop turn: a second's rows at 1,024 streams held the loop for 2-5 ms
        # in one piece. Rows not yet taken stay queued if the run ends meanwhile.
        parts = self.parts
        while True:
            gevent.sleep(LOCAL_FLUSH_S)
            for _ in range(len(parts.pending_rows) // ROWS_PER_SLICE):
                parts.write_rows(parts.take_rows(ROWS_PER_SLICE))
                let_io_run()
            parts.write_rows(parts.take_rows(ROWS_PER_SLICE))
            parts.live.add_itl_delta(parts.stats.take_delta(), time.time())

    def flush_queued(self) -> None:
        parts = self.parts
        parts.write_rows(parts.take_rows(len(parts.pending_rows)))

    def last_sample(self) -> None:
        self.parts.sample_history(time.time())


class MasterRole(Role):
    name = "master"
    leads = True

    def __init__(self, parts: RunParts) -> None:
        super().__init__(parts)
        runner = self.runner
        indexes = getattr(runner, "worker_indexes", None)  # Locust's own: who got which index at its client_ready
        gate = Gate(cluster_token(parts), (lambda c: indexes.get(c)) if isinstance(indexes, dict) else lambda c: None)
        self.link = link = MasterLink(runner, self._ingest, self._run_info, gate=gate)
        if getattr(runner, "server", None) is not None:  # what may reach a handler at all (Locust's real master)
            self.guard = ChannelGuard(runner, hold=link.queue.full)
        self.copies = {}
        send_without_secrets(runner)  # Locust ships the master's options to every worker: withhold secrets

    def send(self, message: MessageType, data: Any) -> None:
        if message.direction == MASTER_TO_WORKER:
            self.link.broadcast(message.name, data)
        else:
            self._deliver_here(message, data, "master")

    @property
    def processes(self) -> int:
        return max(1, len(self.link.expected))

    def load_processes(self) -> set[str]:
        return set(self.link.expected)

    def processes_note(self, processes: set[str]) -> str:
        return f" ({len(processes)} worker processes)"

    def _run_info(self) -> dict[str, Any]:  # the master tells each worker how many share the load, its --csv
        return messages.PROCESSES.payload(n=self.processes, **master_csv(self.parts.option("csv_prefix") or ""),
                                          run_id=self.parts.run.run_id, version=messages.PROTOCOL_VERSION)

    def refused_note(self) -> str:
        return self.link.gate.note()

    def refused_messages(self) -> int:
        return self.link.gate.refused_messages

    def admits(self, node_id: str, message: MessageType, data: Any) -> bool:
        return self.link.admits(node_id, message, data)

    def _ingest(self, client_id: str, payload: dict[str, Any]) -> None:
        """One worker's report, rows or final message, checked (membership.Gate) and queued before."""
        parts = self.parts
        wire = payload.get("stats")
        if wire:
            parts.stats.merge_wire(wire)
            parts.live.add_itl_delta(wire, time.time())
        rows = payload.get("rows")
        if rows:
            col, users = _USERS_COL, self.link.users
            parts.write_rows([(*row[:col], users.total_at(row[1], client_id, row[col]), *row[col + 1:])
                              for row in rows])
        if "health" in payload:
            parts.clients.add(client_id, payload["health"], payload.get("in_flight", {}), payload.get("index", 0))
        if isinstance(payload.get("copy"), dict):  # where the worker keeps its own copy of its rows
            self.copies[client_id] = {**payload["copy"], "index": payload.get("index", "?")}

    def start(self) -> None:
        self.link.start()
        self.link.queue.start()
        self.send(messages.PROCESSES, self._run_info())

    def flush_queued(self) -> None:
        self.link.queue.flush()

    def stop(self) -> bool:
        self.link.collect_finals(self.env.stop_timeout or 0.0)
        return True

    def client_state(self) -> tuple[dict[str, int], list[dict[str, Any]]]:
        return self.parts.clients.state()

    def lost(self) -> list[tuple[int | str, str, int]]:
        return self.link.lost()
