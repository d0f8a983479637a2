"""Which role a Locust process plays, from its runner: the one place that asks (every other caller
asks the role, :mod:`llmload.plugin.cluster.roles`).

Usage::

    role = make_role(parts)      # LocalRole, MasterRole or WorkerRole
"""

from __future__ import annotations

from locust.runners import MasterRunner, WorkerRunner

from llmload.plugin.cluster.roles import LocalRole, MasterRole, Role
from llmload.plugin.cluster.worker_role import WorkerRole
from llmload.plugin.run.run_parts import RunParts


def make_role(parts: RunParts) -> Role:
    """The role of this Locust process, from its runner."""
    runner = parts.env.runner
    if isinstance(runner, WorkerRunner):
        return WorkerRole(parts)
    if isinstance(runner, MasterRunner):
        return MasterRole(parts)
    return LocalRole(parts)
