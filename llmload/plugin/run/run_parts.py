"""What the roles (:mod:`llmload.plugin.cluster.roles`) and the views (:mod:`llmload.plugin.web.views`) use of
a process's run: the parts the plugin holds, declared once so neither imports the plugin.

Usage::

    def finish(parts: RunParts) -> None:
        parts.files.write_llm_stats(parts.stats.rows())
"""

from __future__ import annotations

from typing import Any, Protocol

from llmload.health.fleet import ClientView
from llmload.health.sampler import ClientHealth
from llmload.metrics.stats import LLMStats
from llmload.plugin.output.live import LiveHistory, LiveWindow
from llmload.plugin.output.run_files import RunFiles
from llmload.plugin.output.run_manifest import RunIdentity
from llmload.server_metrics.scrape import ServerMetricsScraper
from llmload.shapes.isolation import PhaseMarks
from llmload.shapes.warmup import WarmupRows


class RunParts(Protocol):
    env: Any
    """Locust's Environment."""
    stats: LLMStats
    live: LiveWindow
    history: LiveHistory
    health: ClientHealth
    """This process's own health (a load-generating process)."""
    clients: ClientView
    """Every load-generating process's health."""
    run: RunIdentity
    files: RunFiles
    scraper: ServerMetricsScraper | None
    in_flight: dict[str, int]
    pending_rows: list[tuple]
    """Rows not yet written or shipped."""
    stop_reason: str
    warmup_rows: WarmupRows
    """Marks the warm-up's rows (``phase=warmup``) and counts them."""
    phase_marks: PhaseMarks
    """Marks the other phases' rows (``--isolation``: ``alone:CLASS``, ``together``)."""

    @property
    def config(self) -> Any: ...
    @property
    def run_finished(self) -> bool: ...
    def option(self, name: str, default: Any = None) -> Any: ...
    def write_rows(self, rows: list) -> None: ...
    def take_rows(self, n: int) -> list[tuple]: ...
    def sample_history(self, now: float) -> list[dict[str, Any]]: ...
    def set_arrival_rate(self, rate: float | None) -> None: ...
