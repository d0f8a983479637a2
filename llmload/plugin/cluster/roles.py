"""The part a Locust process plays in a run, one object per role behind one interface (as Locust's
``LocalRunner``/``MasterRunner``/``WorkerRunner``): callers ask the role, never which role it is.

* :class:`LocalRole`: generates the load and writes the run's files. :meth:`Role.send` loops a
  message back to this process's own handler (as ``LocalRunner.send_message``), so the trace
  clock, the rate ladder and "every trace request is sent" take the same path as in a
  distributed run.
* :class:`MasterRole`: writes the files from every worker's rows (:class:`~llmload.plugin.cluster.links.MasterLink`),
  sends master→worker messages to every worker, waits for their final rows at stop.
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
from collections.abc import Callable
from typing import Any

import gevent
from locust.rpc import Message

from llmload.files import COL
from llmload.net.turns import let_io_run
from llmload.plugin.cluster import messages
from llmload.plugin.cluster.channel_guard import ChannelGuard
from llmload.plugin.cluster.links import WORKER_REPORT_S, MasterLink
from llmload.plugin.cluster.membership import Gate, cluster_token
from llmload.plugin.cluster.messages import MASTER_TO_WORKER, MessageType
from llmload.plugin.options.shipped_options import send_without_secrets
from llmload.plugin.output.end_of_run import end_of_run_text
from llmload.plugin.run.config import ConfigError
from llmload.plugin.run.isolated import run_each
from llmload.plugin.run.run_parts import RunParts

log = logging.getLogger("llmload")

LOCAL_FLUSH_S = 1.0
ROWS_PER_SLICE = 100  # rows written per loop turn (~0.5 ms at 1,024 streams)
_USERS_COL = COL.users
_START_COL = COL.start_time
Handler = Callable[[Any, str], None]
"""A message handler: ``handler(data, node_id)``."""


class Role:
    """One interface for the three roles; see the module docstring."""

    name = ""
    leads = False
    """This process decides for the run: the trace clock, the run id, the files and the summary."""
    generates_load = False
    """Users run here (its own client health is sampled)."""
    token = ""
    """This process's --cluster-token, shown to the master with every payload (a worker's)."""

    def __init__(self, parts: RunParts) -> None:
        self.parts = parts
        self.env = parts.env
        self.runner = parts.env.runner
        self._background: list[gevent.Greenlet] = []
        self._refused: set[str] = set()

    # -- messages --------------------------------------------------------------------------------
    def handle(self, message: MessageType, handler: Handler, concurrent: bool = False) -> None:
        """Call ``handler(data, node_id)`` when ``message`` reaches this process with its declared shape."""
        def listener(environment: Any, msg: Any, **_kw: Any) -> None:
            if self.admits(msg.node_id, message, msg.data):
                handler(msg.data, msg.node_id)
        self.runner.register_message(message.name, listener, concurrent=concurrent)

    def admits(self, node_id: str, message: MessageType, data: Any) -> bool:
        """A message from another process: take it? (a worker: it has its shape; said once per type)"""
        why = message.refusal(data)
        if why and message.name not in self._refused:
            self._refused.add(message.name)
            log.error("llmload: refused a %s message from %s: %s (said once per message type)", message.name, node_id,
                      why)
        return not why

    def send(self, message: MessageType, data: Any) -> None:
        """Deliver ``message`` to the process(es) that handle it (its direction says which)."""
        raise NotImplementedError

    def _deliver_here(self, message: MessageType, data: Any, node_id: str) -> None:
        """A message whose handler is this process's own: called at once, as Locust's LocalRunner does."""
        listener = self.runner.custom_messages.get(message.name)
        if listener is not None:
            listener[0](environment=self.env, msg=Message(message.name, data, node_id))

    @property
    def worker_index(self) -> int:
        return int(getattr(self.runner, "worker_index", 0) or 0)

    @property
    def processes(self) -> int:
        """Processes sharing the load."""
        return 1

    def load_processes(self) -> set[str]:
        """The node ids of the processes that generate load (for "every one of them is done")."""
        return set()

    def live_lag_s(self) -> float:  # how far behind now the live window ends: rows come a report late
        return WORKER_REPORT_S + 1.0

    def processes_note(self, processes: set[str]) -> str:
        """What a log line says about the load-generating processes ('' for this process alone)."""
        return ""

    def announce(self, request_id: str) -> None:
        """A request id is about to be written (only a worker tells its master)."""

    def client_state(self) -> tuple[dict[str, int], list[dict[str, Any]]]:
        """(in-flight requests per scenario, health samples) over every load-generating process."""
        _, health = self.parts.clients.state()
        return dict(self.parts.in_flight), health

    def lost(self) -> list[tuple[int | str, str, int]]:
        """Workers with requests the master has no row for (see MasterLink.lost)."""
        return []

    def file_failed(self, error: Exception) -> None:
        """A file of the run cannot be written (RunFiles calls this once): the run stops, exit code 1."""
        log.error("llmload: %s; the run is stopped", error)
        self.env.process_exit_code = 1
        self.end_run()

    def end_run(self) -> None:
        """End the run as Locust does when a load shape ends: headless quits, the web UI stops."""
        if self.runner is None:
            return
        opts = self.env.parsed_options
        gevent.spawn(self.runner.quit if opts is not None and opts.headless else self.runner.stop)

    # -- the run's lifecycle ---------------------------------------------------------------------
    def start(self) -> None:
        """At test start, after the plugin has reset the run's state."""

    def stop(self) -> bool:
        """At test stop; True when this process then ends the run (files, summary)."""
        return True

    def quitting(self) -> None:
        """Locust quits: a run still going is stopped the normal way first."""
        if self.runner is not None and self.runner.state not in ("stopped", "stopping", "ready"):
            self.runner.stop()

    def spawn(self, fn: Callable[[], Any]) -> None:
        """A background loop of this test (killed at its end)."""
        self._background = [g for g in self._background if not g.dead]
        self._background.append(gevent.spawn(fn))

    def stop_background(self) -> None:
        for g in self._background:
            g.kill(block=False)
        self._background = []

    def flush_queued(self) -> None:
        """What is still queued in this process, written before the final files."""

    def last_sample(self) -> None:
        """The history's last row, where this process samples its own health."""

    def refused_note(self) -> str:  # workers and messages the master refused (membership.Gate.note)
        return ""

    def refused_messages(self) -> int:
        return 0

    def finish_run(self, interval_s: float) -> None:
        """The final files and, unattended, the summary (master or local process)."""
        parts, files, table = self.parts, self.parts.files, []

        def summary() -> None:
            lost = self.lost()
            if (lost or self.refused_messages()) and self.env.process_exit_code is None:
                self.env.process_exit_code = 1  # rows the server saw are missing here: not a clean run
            if not table or not (parts.option("headless") or parts.option("autostart")):
                return  # unattended runs say how it went
            try:
                hit_ratios = parts.config.expected_hit_ratios()
            except ConfigError:
                hit_ratios = {}
            print("\n" + end_of_run_text(table, hit_ratios, parts.history, parts.stop_reason, interval_s, lost,
                                         files.prefix, files.error, parts.clients.stall_notes(),
                                         self.refused_note(), parts.option("seed"),
                                         parts.warmup_rows.summary()) + "\n", flush=True)
            if files.requests is not None:
                print(f"llmload: {files.requests.rows_written} request rows in {files.requests.path}", flush=True)

        run_each("the end of the run", (
            ("the rows still queued", self.flush_queued), ("the stats table", lambda: table.extend(parts.stats.rows())),
            ("the client health", parts.health.stop), ("the history's last row", self.last_sample),
            ("PREFIX_llm_stats.csv", lambda: files.write_llm_stats([*table, *parts.stats.model_rows()])),
            ("the history file", files.close_history), ("PREFIX_run.json's end", lambda: files.run.finish(time.time())),
            ("the summary", summary)))


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
        return messages.PROCESSES.payload(n=self.processes, csv=self.parts.option("csv_prefix") or "",
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
