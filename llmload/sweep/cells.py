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

from llmload.sweep.fleet.routers import ROUTERS
from llmload.sweep.plan import Deployment, Plan, Workload

SERVER_START_GUESS_S = 15.0  # a serve: cell's start and stop, for the estimate only
REPORT_GUESS_S = 3.0
ROUTER_START_GUESS_S = {"nginx": 2.0, "litellm": 12.0}


@dataclass(frozen=True)
class Variant:
    """One deployment with one combination of the params it uses: what the frontier calls a deployment.
    A fleet's variant also has its replica count and routing policy (``replicas`` 0: not a fleet)."""

    deployment: Deployment
    params: dict[str, Any] = field(default_factory=dict)
    replicas: int = 0
    policy: str = ""  # a fleet of one has none: its router runs its default

    @property
    def base_id(self) -> str:
        """The deployment with its params, without the fleet's size and policy."""
        extra = ",".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        return self.deployment.name + (f"[{extra}]" if extra else "")

    @property
    def id(self) -> str:
        if not self.replicas:
            return self.base_id
        return f"{self.base_id} ×{self.replicas}" + (f" {self.policy}" if self.policy else "")

    @property
    def folder(self) -> str:
        extra = "-".join(f"{k}={v}" for k, v in sorted(self.params.items()))
        fleet = f"-k{self.replicas}" + (f"-{self.policy}" if self.policy else "") if self.replicas else ""
        return _safe(self.deployment.name + (f"-{extra}" if extra else "") + fleet)

    @property
    def gpus(self) -> int:
        """GPUs of the whole cell: a fleet's replicas together."""
        return self.deployment.gpus * max(1, self.replicas)

    def command(self, port: int, replica: int = 0) -> list[str]:
        """The serve: template split like a shell would, then each word filled in (a value with a
        space stays one argument); ``{replica}`` is the replica's index in a fleet (0 otherwise)."""
        assert self.deployment.serve is not None
        values = {**{k: str(v) for k, v in self.params.items()}, "port": str(port), "replica": str(replica)}
        return [word.format(**values) for word in shlex.split(self.deployment.serve)]

    def env(self, port: int, replica: int = 0) -> dict[str, str]:
        """The deployment's env:, ``{port}`` and ``{replica}`` filled in (CUDA_VISIBLE_DEVICES: "{replica}")."""
        return {k: v.replace("{port}", str(port)).replace("{replica}", str(replica))
                for k, v in self.deployment.env.items()}


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
    """Every deployment × its params; a fleet × its replica counts × its policies (one of one replica:
    a policy has nothing to choose among one)."""
    out = []
    for d in plan.deployments:
        names = sorted(set(plan.params) & d.placeholders())
        for combo in itertools.product(*(plan.params[n] for n in names)):
            params = dict(zip(names, combo, strict=True))
            if d.fleet is None:
                out.append(Variant(d, params))
                continue
            for k in d.fleet.replicas:
                out += [Variant(d, params, k, "")] if k == 1 else [Variant(d, params, k, p) for p in d.fleet.policies]
    return out


def expand(plan: Plan) -> list[Cell]:
    """Every cell, repeats outermost so that a stopped sweep has a whole first round."""
    return [Cell(v, w, r) for r in range(1, plan.repeats + 1) for v in variants(plan) for w in plan.workloads]


def cell_seconds(plan: Plan, cell: Cell) -> float:
    start = SERVER_START_GUESS_S if cell.variant.deployment.serve else 0.0
    if cell.variant.replicas:  # replicas start together; the router and its routing check after them
        start += ROUTER_START_GUESS_S[cell.variant.deployment.fleet.router]
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
        if c.variant.replicas:
            fleet = d.fleet
            assert fleet is not None
            where = (f"{c.variant.replicas} × [{where}] behind {fleet.router} "
                     f"({c.variant.policy or ROUTERS[fleet.router].default_policy}), steps × {c.variant.replicas}")
        lines.append(f"  {c.id}: {c.workload.name} on {c.variant.id} ({c.variant.gpus} GPU × "
                     f"${d.gpu_hourly_usd:g}/h): {where}")
    total = estimate_seconds(plan)
    lines.append(f"estimated time: {total / 60:.1f} min ({total:.0f} s; server start guessed at "
                 f"{SERVER_START_GUESS_S:g} s per cell)")
    return "\n".join(lines)
