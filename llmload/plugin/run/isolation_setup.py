"""``--isolation`` at init: the options checked, the user classes grouped by priority class, and
the shape installed where shapes run (the master or the only process).

Each user class of the run must run workloads of one priority class (``priority:`` in the
scenario file), so a phase can run one class alone: a locustfile of ``users_from_scenario`` has a
user class per workload. The shape is :class:`llmload.shapes.isolation_shape.IsolationShape`.

Usage::

    isolation = check_isolation(environment, config)   # IsolationSetup | None; raises ConfigError
    install_isolation(environment, isolation)          # environment.shape_class = IsolationShape(...)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmload.plugin.options.flags import option
from llmload.plugin.options.option_checks import ConfigError
from llmload.shapes.isolation import ClassGroup, IsolationPlan, parse_isolation, phase_plan


@dataclass(frozen=True)
class IsolationSetup:
    plan: IsolationPlan
    groups: tuple[ClassGroup, ...]
    run_users: int  # -u: the together phase's users when --isolation-users is not given


def _class_of(cls: type, config: Any) -> tuple[str, float]:
    """The priority class (and its rank) of a user class's workloads; ConfigError when it has none or several."""
    setup = config.setup_for(cls)
    spec = setup.scenario
    if spec is None:
        raise ConfigError(f"--isolation: {cls.__name__} runs no scenario file; its workloads need priority: "
                          "classes (scenarios/priority.yaml shows how)")
    workloads = [spec.workload(setup.workload)] if setup.workload else list(spec.workloads)
    names = {w.priority.name if w.priority is not None else None for w in workloads}
    if None in names:
        bare = next(w for w in workloads if w.priority is None)
        if bare.body is not None and bare.pipeline is None:  # endpoint embeddings|rerank|score: no class to give
            raise ConfigError(f"--isolation: {spec.path}: workloads.{bare.name} (endpoint {bare.endpoint}) sends "
                              "whole-body requests, which have no priority: class; run its user class without "
                              "--isolation")
        raise ConfigError(f"--isolation: {spec.path}: workloads.{bare.name} has no priority: class; give every "
                          "workload one (priority: {class: NAME, value: N})")
    if len(names) > 1:
        raise ConfigError(f"--isolation: {cls.__name__} draws workloads of several priority classes "
                          f"({', '.join(sorted(n for n in names if n))}); give each workload its own user class: "
                          "globals().update(users_from_scenario(PATH))")
    return names.pop(), min(w.priority.rank for w in workloads if w.priority is not None)


def check_isolation(environment: Any, config: Any) -> IsolationSetup | None:
    """The isolation run the options ask for (None: none); ConfigError with the first problem."""
    try:
        plan = parse_isolation(*(option(environment, k) for k in ("isolation", "isolation_seconds",
                                                                   "isolation_users", "isolation_spawn_rate")))
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if plan is None:
        return None
    from llmload.shapes.isolation_shape import IsolationShape  # Locust's LoadTestShape: only for an isolation run
    from llmload.shapes.warmup_shape import WarmupShape

    shape = getattr(environment, "shape_class", None)
    if isinstance(shape, WarmupShape):  # a check at a test's start: the warm-up in front of the installed shape
        shape = shape.inner
    if shape is not None and not isinstance(shape, IsolationShape):
        raise ConfigError(f"--isolation runs its own phases; the locustfile's shape {type(shape).__name__} cannot run "
                          "beside it: leave it out of the locustfile")
    classes = [c for c in (getattr(environment, "user_classes", None) or []) if getattr(c, "llmload_user", False)]
    grouped: dict[str, tuple[float, list[type]]] = {}
    for cls in classes:
        name, rank = _class_of(cls, config)
        old_rank, members = grouped.get(name, (rank, []))
        grouped[name] = (min(old_rank, rank), [*members, cls])
    found = []
    for name, (rank, members) in grouped.items():
        weights = tuple(float(getattr(c, "weight", 1) or 1) for c in members)
        found.append(ClassGroup(name, rank, tuple(c.__name__ for c in members), sum(weights), weights))
    groups = tuple(found)
    run_users = int(option(environment, "num_users", 0) or 0)
    try:
        phase_plan(plan, groups, run_users)
    except ValueError as e:
        raise ConfigError(str(e)) from None
    return IsolationSetup(plan, groups, run_users)


def install_isolation(environment: Any, isolation: IsolationSetup | None) -> None:
    """Put the isolation shape on the environment (once; a later call keeps the one there)."""
    from llmload.shapes.isolation_shape import IsolationShape

    if isolation is None or isinstance(environment.shape_class, IsolationShape):
        return
    classes = {c.__name__: c for c in environment.user_classes}
    environment.shape_class = IsolationShape(isolation.plan, isolation.groups, classes, isolation.run_users)
    environment.shape_class.runner = environment.runner
