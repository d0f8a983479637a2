"""What a report is: its options, one section per scenario (steps, capacity, cost, plan), and the whole."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import pandas as pd

from llmload.metrics.slo import DEFAULT_ERROR_BUDGET, SLO
from llmload.metrics.step_verdict import SAMPLE_FLOOR
from llmload.report.load import ReportError
from llmload.report.steps import Step

DEFAULT_WARMUP_S = 5.0


@dataclass
class ReportOptions:
    slos: list[SLO] = field(default_factory=list)
    warmup_s: float | None = None  # None: the shape's from PREFIX_run.json (search, SLO stop), else DEFAULT_WARMUP_S
    error_budget: float | None = DEFAULT_ERROR_BUDGET  # error_rate ≤ this unless an error_rate SLO is given; None: off
    sample_floor: int = SAMPLE_FLOOR  # ok requests a step needs for a verdict
    run_id: str | None = None  # the run to report on, when the CSV holds several
    gpu_hourly_usd: float | None = None
    gpus_per_replica: int = 1
    target_rps: float | None = None
    daily_requests: float | None = None
    peak_factor: float = 1.0
    headroom: float = 0.3
    output_cost_weight: float | None = None
    usd_per_kwh: float | None = None  # the price of energy, for the GPUs' energy cost (--gpu-metrics runs)
    allow_throttled: bool = False  # a step whose GPUs throttled (or logged an XID) may be capacity

    def validate(self) -> None:
        if self.warmup_s is not None and self.warmup_s < 0:
            raise ReportError(f"--warmup-s {self.warmup_s}: expected seconds >= 0")
        if self.sample_floor < 1:
            raise ReportError(f"--sample-floor {self.sample_floor}: expected a whole number >= 1")
        if self.error_budget is not None and not 0 <= self.error_budget <= 1:
            raise ReportError(f"--error-budget {self.error_budget}: expected a fraction between 0 and 1, or off")
        if self.gpu_hourly_usd is not None and self.gpu_hourly_usd < 0:
            raise ReportError(f"--gpu-hourly-usd {self.gpu_hourly_usd}: expected a price >= 0")
        if self.usd_per_kwh is not None and not self.usd_per_kwh >= 0:
            raise ReportError(f"--usd-per-kwh {self.usd_per_kwh}: expected a price >= 0, e.g. 0.12")
        if self.gpus_per_replica < 1:
            raise ReportError(f"--gpus-per-replica {self.gpus_per_replica}: expected a whole number >= 1")
        if self.target_rps is not None and self.daily_requests is not None:
            raise ReportError("give either --target-rps or --daily-requests (with --peak-factor), not both")
        if self.target_rps is not None and self.target_rps <= 0:
            raise ReportError(f"--target-rps {self.target_rps}: expected requests/s > 0")
        if self.daily_requests is not None and self.daily_requests <= 0:
            raise ReportError(f"--daily-requests {self.daily_requests}: expected a count > 0")
        if self.peak_factor < 1:
            raise ReportError(f"--peak-factor {self.peak_factor}: expected >= 1 (peak rate ÷ average rate)")
        if not 0 <= self.headroom < 1:
            raise ReportError(f"--headroom {self.headroom}: expected a fraction in [0, 1), e.g. 0.3")

    @property
    def plan_target_rps(self) -> float | None:
        if self.target_rps is not None:
            return self.target_rps
        if self.daily_requests is not None:
            return self.daily_requests * self.peak_factor / 86_400.0
        return None


@dataclass
class Section:
    """Steps, capacity, cost and plan for one scenario or for the whole run."""

    name: str
    slos: list[SLO]
    steps: list[Step]
    capacity: dict[str, Any]
    cost: dict[str, Any] | None
    plan: dict[str, Any] | None
    prefix_cache: dict[str, Any] | None
    requests: int

    def to_json(self) -> dict[str, Any]:
        return {
            "slos": [s.text() for s in self.slos],
            "requests": self.requests,
            "steps": [s.data for s in self.steps],
            "capacity": self.capacity,
            "cost": self.cost,
            "plan": self.plan,
            "prefix_cache": self.prefix_cache,
        }


@dataclass
class Report:
    source: str
    options: ReportOptions
    overall: Section
    scenarios: dict[str, Section]
    warnings: list[str]
    notes: list[str]
    df: pd.DataFrame
    level: str = "users"  # or "arrival_rate": what the steps are
    warmup_s: float = DEFAULT_WARMUP_S  # the warm-up used
    error_budget: str = ""  # how failures counted, in words
    run_id: str | None = None
    manifest: dict[str, Any] | None = None
    replicas: dict[str, Any] | None = None  # a fleet's replicas apart (llmload.report.sections.replicas)

    @property
    def level_label(self) -> str:
        return "arrival rate (req/s)" if self.level == "arrival_rate" else "users"

    def to_json(self) -> dict[str, Any]:
        o = self.overall.to_json()
        return {
            "source": self.source,
            "run_id": self.run_id,
            "run": self.manifest,
            "warmup_s": self.warmup_s,
            "sample_floor": self.options.sample_floor,
            "error_budget": self.error_budget,
            "steps_by": self.level,
            "slos": [s.text() for s in self.options.slos],
            "steps": o["steps"],
            "capacity": o["capacity"],
            "cost": o["cost"],
            "plan": o["plan"],
            "prefix_cache": o["prefix_cache"],
            "scenarios": {name: s.to_json() for name, s in self.scenarios.items()},
            "warnings": self.warnings,
            "notes": self.notes,
            **({"replicas": self.replicas} if self.replicas is not None else {}),
        }


