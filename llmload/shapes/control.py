"""What a load shape may ask of the run it shapes: the one interface between shapes and the plugin.

The plugin puts an implementation on the Locust environment (:data:`CONTROL_ATTR`); a shape in a
process without llmload's plugin (a hand-built Environment) gets ``None`` and runs its schedule
without SLOs.

Usage::

    control = control_of(environment)
    if control is not None:
        per_scenario = control.live_window(time.time())
        control.set_arrival_rate(4.0)
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from llmload.metrics.scenario_stats import ScenarioStats
from llmload.metrics.slo import SLO

CONTROL_ATTR = "llmload_shapes"


class ShapeControl(Protocol):
    def shape_settings(self) -> dict[str, Any]:
        """The scenario file's ``shape:`` mapping ({} without one)."""
        ...

    def slos(self) -> list[SLO]:
        """The run's SLOs (``--slo`` and the scenario's ``slo:``)."""
        ...

    def live_window(self, now: float) -> dict[str, ScenarioStats]:
        """Per scenario, the stats of the live window that ends ``live_lag_s`` before ``now``."""
        ...

    def live_lag_s(self) -> float:
        """How far behind now the rows are complete (up to a worker's report interval)."""
        ...

    def set_arrival_rate(self, rate: float | None) -> None:
        """Open-loop workloads: the arrival rate (requests/s over every process) from now on
        (None: each workload's own rate again)."""
        ...

    def warmup_began(self, seconds: float) -> None:
        """The warm-up starts: every row written from now on is a warm-up row ..."""
        ...

    def warmup_ended(self, at: float) -> None:
        """... until the warm-up's end (epoch s): rows of requests started later are not."""
        ...

    def phase_began(self, label: str, at: float) -> None:
        """A phase of the run began at ``at`` (epoch s): rows of requests started from then on carry
        ``label`` in their phase column (``--isolation``: ``alone:CLASS``, ``together``)."""
        ...

    def stopped_because(self, text: str) -> None:
        """Why the shape stopped or held (the run's summary says it)."""
        ...

    def watch_rows(self, listener: Callable[[list[tuple]], None]) -> None:
        """``listener(rows)`` for every batch of request rows written from now on (once per listener)."""
        ...


def control_of(environment: Any) -> ShapeControl | None:
    return getattr(environment, CONTROL_ATTR, None) if environment is not None else None
