"""The narrow views of a run that code outside the plugin's core reads: the web UI's
:class:`~llmload.plugin.web.llm_tab.LiveView` and the load shapes'
:class:`~llmload.shapes.control.ShapeControl`. Each method answers one question from the run's
parts; neither reader sees the plugin.

Usage (the plugin makes one per process)::

    views = RunViews(plugin, role)
    environment.llmload_shapes = views          # shapes.control.control_of(environment)
    webui.install(environment, views)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llmload import files
from llmload.health.run_verdict import client_line
from llmload.metrics.scenario_stats import ScenarioStats
from llmload.metrics.slo import SLO
from llmload.plugin.cluster import messages
from llmload.plugin.cluster.role import Role
from llmload.plugin.output.end_of_run import error_note
from llmload.plugin.run.run_parts import RunParts


class RunViews:
    def __init__(self, parts: RunParts, role: Role) -> None:
        self._parts = parts
        self._role = role

    # -- the web UI (LiveView) -------------------------------------------------------------------
    @property
    def run_finished(self) -> bool:
        return self._parts.run_finished

    def runner_state(self) -> str:
        runner = self._parts.env.runner
        return getattr(runner, "state", "") if runner is not None else ""

    def stats_rows(self) -> list[dict[str, Any]]:
        return self._parts.stats.rows()

    def has_tasks(self) -> bool:
        return self._parts.stats.has_tasks()

    def latest_rows(self) -> list[dict[str, Any]]:
        return self._parts.history.latest()

    def model_stats_rows(self) -> list[dict[str, Any]]:
        return self._parts.stats.model_rows()

    def model_rows(self) -> list[dict[str, Any]]:
        """models: mixes: the newest live rows per (scenario, model); the whole run's once it ended."""
        if self.run_finished and self.runner_state() in ("stopped", "ready", ""):
            return self._parts.stats.model_rows()
        return self._parts.history.models_latest

    def history_rows(self, since: float = float("-inf")) -> list[dict[str, Any]]:
        return self._parts.history.rows_since(since)

    def client_health(self) -> list[dict[str, Any]]:
        return self._role.client_state()[1]

    def client_verdict(self) -> dict[str, Any]:
        """The client's verdict over the run so far: the end-of-run summary's line, by the same
        function over the same intervals (``text``), and how many intervals were limited."""
        parts = self._parts
        history = parts.history
        first = bool(error_note(parts.stats.rows(), history.error_intervals, history.client.interval_s))
        return {"text": client_line(history.client, parts.clients.stalls, parts.clients.timing, first),
                "limited_intervals": len(history.client.limited), "intervals": history.client.intervals}

    def server_samples(self) -> list[dict[str, Any]]:
        scraper = self._parts.scraper
        return list(scraper.samples) if scraper is not None else []

    def server_urls(self) -> list[str]:
        scraper = self._parts.scraper
        return list(scraper.urls) if scraper is not None else []

    def model(self) -> str:
        manifest = self._parts.run.manifest
        data = getattr(manifest, "data", None) or {}
        return str(self._parts.option("model") or data.get("model") or "")

    def load_state(self) -> dict[str, Any]:
        runner = self._parts.env.runner
        in_flight, health = self._role.client_state()
        return {"users": runner.user_count if runner is not None else 0, "in_flight": in_flight, "health": health}

    def run_file(self, suffix: str) -> str | None:
        """The run's file of ``suffix`` (a :mod:`llmload.files` name) with ``--csv``, else None."""
        prefix = self._parts.option("csv_prefix")
        return files.path(prefix, suffix) if prefix else None

    # -- the load shapes (ShapeControl) ----------------------------------------------------------
    def shape_settings(self) -> dict[str, Any]:
        return self._parts.config.shape

    def slos(self) -> list[SLO]:
        return list(self._parts.config.slos)

    def live_window(self, now: float) -> dict[str, ScenarioStats]:
        return self._parts.live.merged(now, self.live_lag_s(), warmup=False)[0]  # the warm-up is never judged

    def live_lag_s(self) -> float:
        return self._role.live_lag_s()

    def set_arrival_rate(self, rate: float | None) -> None:
        self._parts.set_arrival_rate(rate)

    def warmup_began(self, seconds: float) -> None:
        self._parts.warmup_rows.begin(seconds)
        self._tell_workers(messages.WARMUP.payload(seconds=seconds, ended_at=None))

    def warmup_ended(self, at: float) -> None:
        self._parts.warmup_rows.end(at)
        self._tell_workers(messages.WARMUP.payload(seconds=self._parts.warmup_rows.seconds, ended_at=at))

    def _tell_workers(self, payload: dict[str, Any], message: messages.MessageType = messages.WARMUP) -> None:
        """Workers mark the warm-up and the phases in their own copy of their rows (PREFIX_requests.workerN.csv)."""
        if self._role.leads and self._role.name == "master":
            self._role.send(message, payload)

    def phase_began(self, label: str, at: float) -> None:
        self._parts.phase_marks.begin(label, at)
        self._tell_workers(messages.PHASE.payload(label=label, at=at), messages.PHASE)

    def stopped_because(self, text: str) -> None:
        self._parts.stop_reason = text

    def watch_rows(self, listener: Callable[[list[tuple]], None]) -> None:
        listeners = self._parts.run.listeners
        if listener not in listeners:
            listeners.append(listener)
