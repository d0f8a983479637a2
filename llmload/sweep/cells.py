"""The cells of a sweep: deployments × params matrix × workloads × repeats, each with a stable id
(its folder under DIR/cells/). Pure.

Usage::

    for cell in expand(plan):
        cell.id, cell.command(port=8123)   # "small-max_num_seqs=64.chat.r1", [..., "--max-num-seqs", "64"]
    estimate_seconds(plan)                 # for --dry-run
"""

from __future__ import annotations

import itertools
import re
import shlex
from dataclasses import dataclass, field
from typing import Any

from llmload.sweep.plan import Deployment, Plan, Workload

SERVER_START_GUESS_S = 15.0  # a serve: cell's start and stop, for the estimate only
REPORT_GUESS_S = 3.0


@dataclass(frozen=True)
class Variant:
    """One deployment with one combination of the params it uses: what the frontier calls a deployment."""

    deployment: Deployment
    params: dict[str, Any] = field(default_factory=dict)

    @property
    def id(self) -> str:
        extra = ",".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return self.deployment.name + (f"[{extra}]" if extra else "")

    @property
    def folder(self) -> str:
        extra = "-".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return _safe(self.deployment.name + (f"-{extra}" if extra else ""))

    def command(self, port: int) -> list[str]:
        """The serve: template split like a shell would, then each word filled in (a value with a
        space stays one argument)."""
        assert self.deployment.serve is not None
        values = {**{k: str(v) for k, v in self.params.items()}, "port": str(port)}
        return [word.format(**values) for word in shlex.split(self.deployment.serve)]


@dataclass(frozen=True)
class Cell:
    variant: Variant
    workload: Workload
    repeat: int  # 1-based

    @property
    def id(self) -> str:
        return f"{self.variant.folder}.{_safe(self.workload.name)}.r{self.repeat}"


def _safe(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_.=,-]+", "_", text)


def variants(plan: Plan) -> list[Variant]:
    out = []
    for d in plan.deployments:
        names = sorted(set(plan.params) & d.placeholders())
        for combo in itertools.product(*(plan.params[n] for n in names)):
            out.append(Variant(d, dict(zip(names, combo, strict=True))))
    return out


def expand(plan: Plan) -> list[Cell]:
    """Every cell, repeats outermost so that a stopped sweep has a whole first round."""
    return [Cell(v, w, r) for r in range(1, plan.repeats + 1) for v in variants(plan) for w in plan.workloads]


def cell_seconds(plan: Plan, cell: Cell) -> float:
    start = SERVER_START_GUESS_S if cell.variant.deployment.serve else 0.0
    return start + len(plan.load.steps) * plan.load.step_seconds + REPORT_GUESS_S


def estimate_seconds(plan: Plan) -> float:
    return sum(cell_seconds(plan, c) for c in expand(plan))


def dry_run_text(plan: Plan) -> str:
    cells = expand(plan)
    lines = [f"{plan.path}: {len(cells)} cells ({len(variants(plan))} deployments × {len(plan.workloads)} "
             f"workloads × {plan.repeats} repeats), steps {','.join(map(str, plan.load.steps))} users of "
             f"{plan.load.step_seconds:g} s each"
             + (f" at most (a step ends early once known to {plan.load.step_precision:g} %)"
                if plan.load.step_precision else "")]
    for c in cells:
        d = c.variant.deployment
        where = " ".join(shlex.quote(w) for w in c.variant.command(0)).replace("--port 0", "--port {port}") \
            if d.serve else d.host
        lines.append(f"  {c.id}: {c.workload.name} on {c.variant.id} ({d.gpus} GPU × ${d.gpu_hourly_usd:g}/h): {where}")
    total = estimate_seconds(plan)
    lines.append(f"estimated time: {total / 60:.1f} min ({total:.0f} s; server start guessed at "
                 f"{SERVER_START_GUESS_S:g} s per cell)")
    return "\n".join(lines)
