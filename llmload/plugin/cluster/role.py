"""The interface every role of a run has (:class:`Role`, as Locust's runners share one), with what all
roles do alike: deliver a message to this process's own handler, run a background greenlet, and end
the run on the master or a local process (:meth:`Role.finish_run`). The roles themselves are
:mod:`llmload.plugin.cluster.roles`.
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable
from typing import Any

import gevent
from locust.rpc import Message

from llmload.plugin.cluster.links import WORKER_REPORT_S
from llmload.plugin.cluster.messages import MessageType
from llmload.plugin.cluster.worker_copies import copies_note
from llmload.plugin.options.seeds import seed_line
from llmload.plugin.output.end_of_run import client_report, end_of_run_text
from llmload.plugin.run.config import ConfigError
from llmload.plugin.run.isolated import run_each
from llmload.plugin.run.run_parts import RunParts

log = logging.getLogger("llmload")


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

    copies: dict[str, dict[str, Any]] = {}  # a master: worker → where it keeps its own copy (its payloads say)

    def finish_run(self, interval_s: float) -> None:
        """The final files and, unattended, the summary (master or local process)."""
        parts, files, table = self.parts, self.parts.files, []

        def summary() -> None:
            lost = self.lost()
            if (lost or self.refused_messages()) and self.env.process_exit_code is None:
                self.env.process_exit_code = 1  # rows the server saw are missing here: not a clean run
            if not table or not (parts.option("headless") or parts.option("autostart")):
                return  # unattended runs say how it went
            hit_ratios, setups = {}, {}
            with contextlib.suppress(ConfigError):  # a config the run could not use: no ratios to compare
                hit_ratios, setups = parts.config.expected_hit_ratios(), parts.config.setups
            print("\n" + end_of_run_text(table, hit_ratios, parts.history, parts.stop_reason, interval_s, lost,
                                         files.prefix, files.error, parts.clients, self.refused_note(),
                                         seed_line(self.env.parsed_options, [s.scenario for s in setups.values()]),
                                         parts.warmup_rows.summary(), bool(parts.option("verbose"))) + "\n", flush=True)
            if files.requests is not None:
                print(f"llmload: {files.requests.rows_written} request rows in {files.requests.path}", flush=True)
            if self.copies:  # each worker's own copy, wherever it is (beside these files, or on its host)
                print(copies_note(self.copies), flush=True)

        run_each("the end of the run", (
            ("the rows still queued", self.flush_queued), ("the stats table", lambda: table.extend(parts.stats.rows())),
            ("the client health", parts.health.stop), ("the history's last row", self.last_sample),
            ("PREFIX_llm_stats.csv", lambda: files.write_llm_stats([*table, *parts.stats.model_rows()])),
            ("the history file", files.close_history), ("PREFIX_run.json's end", lambda: files.run.finish(
                time.time(), client_report(table, parts.history, parts.clients))),
            ("the summary", summary)))
