"""A worker's part in a distributed run (:mod:`llmload.plugin.cluster.roles`): it generates the load, ships
its rows and stats to the master (:class:`~llmload.plugin.cluster.links.WorkerLink`), keeps its own copy of
its rows, and stops itself when the master is lost (:meth:`WorkerRole.master_lost`).

Usage (from :func:`llmload.plugin.cluster.role_for.make_role`)::

    role = WorkerRole(parts)
    role.start(); role.stop()      # stop sends the final data; the master ends the run
"""

from __future__ import annotations

import logging
from typing import Any

import gevent

from llmload.plugin.cluster import messages
from llmload.plugin.cluster.links import WorkerLink
from llmload.plugin.cluster.membership import cluster_token, stop_without_master
from llmload.plugin.cluster.messages import WORKER_TO_MASTER, MessageType
from llmload.plugin.cluster.role import Role
from llmload.plugin.cluster.worker_copies import keep_own_copy
from llmload.plugin.run.run_parts import RunParts

log = logging.getLogger("llmload")


class WorkerRole(Role):
    name = "worker"
    generates_load = True

    def __init__(self, parts: RunParts) -> None:
        super().__init__(parts)
        self.token = cluster_token(parts)
        self.link = WorkerLink(self.runner, self._take_report, self.runner.stop, parts.pending_rows,
                               on_shipped=self._keep_own_copy, token=self.token)
        self._processes = 1
        self._version_said = False
        self.handle(messages.PROCESSES, self._on_run_info)

    def send(self, message: MessageType, data: Any) -> None:
        if message.direction == WORKER_TO_MASTER:
            self.runner.send_message(message.name, data)
        else:
            self._deliver_here(message, data, self.runner.client_id)

    @property
    def processes(self) -> int:
        return self._processes

    def _on_run_info(self, data: dict[str, Any], _node_id: str) -> None:
        self._processes = max(1, int(data["n"]))
        self.parts.files.take_master_csv(data)
        self.parts.run.run_id = data.get("run_id") or ""
        if data.get("version", 1) != messages.PROTOCOL_VERSION and not self._version_said:
            self._version_said = True
            log.error("llmload: the master speaks protocol version %s, this worker %s: install the same llmload "
                      "version on every worker and the master", data.get("version", 1), messages.PROTOCOL_VERSION)

    def announce(self, request_id: str) -> None:
        self.link.announce(request_id)  # before it is written: the master can count it if this worker vanishes

    def _take_report(self) -> dict[str, Any]:
        parts = self.parts
        return messages.REPORT.payload(stats=parts.stats.take_delta(), in_flight=dict(parts.in_flight),
                                       health=parts.health.take(sum(parts.in_flight.values())),
                                       index=self.worker_index, version=messages.PROTOCOL_VERSION, token=self.token,
                                       copy=parts.files.copy_info(self.worker_index))

    def _keep_own_copy(self, rows: list[tuple]) -> None:
        keep_own_copy(self.parts, self.link.others, rows, self.worker_index)

    def file_failed(self, error: Exception) -> None:
        log.error("llmload: this worker's own copy of its rows stops here: %s; the master still gets them", error)

    def start(self) -> None:
        self.spawn(self.link.report_users)
        self.spawn(self.link.ship_rows)
        lost_after = self.parts.config.faults.master_lost_after_s
        self.spawn(lambda: self.link.watch_master(lost_after, lambda s: gevent.spawn(self.master_lost, s)))

    def stop(self) -> bool:
        self.stop_background()
        self.link.send_final()
        self.parts.health.stop()
        return False  # the master ends the run

    def quitting(self) -> None:
        self.parts.files.close()

    def master_lost(self, silence_s: float) -> None:
        """Stop this worker and exit 1, keeping every row it has (run in a greenlet of its own)."""
        stop_without_master(self.parts, self.env, self.runner, self.worker_index, silence_s)
