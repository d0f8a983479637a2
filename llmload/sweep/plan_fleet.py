"""A deployment's fleet keys in a sweep plan → :class:`Fleet`. Pure; errors name ``file:line: key``.

Usage (from :mod:`llmload.sweep.plan`)::

    fleet = parse_fleet(ctx, raw_deployment, "deployments.mock")   # None without replicas:

The keys (docs/fleet.md)::

    replicas: [1, 2, 4]          # K replicas of serve: per cell (a number or a list)
    router: nginx                # nginx (default) or litellm
    policy: [round_robin, least_conn, affinity]   # the router's own; default its first
    affinity_key: session        # what affinity pins: session (the session, else the prefix) or prefix
    metrics_path: /metrics       # each replica's Prometheus text, read per replica
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmload.sweep.fleet.routers import AFFINITY_KEYS, ROUTERS, policy_problem
from llmload.workload.file.yaml_lines import Ctx

FLEET_KEYS = {"replicas", "router", "policy", "affinity_key", "metrics_path"}
MAX_REPLICAS = 64


@dataclass(frozen=True)
class Fleet:
    replicas: tuple[int, ...]
    router: str = "nginx"
    policies: tuple[str, ...] = ("round_robin",)
    affinity_key: str = "session"
    metrics_path: str = "/metrics"


def _list(raw: Any) -> list[Any]:
    return raw if isinstance(raw, list) else [raw]


def parse_fleet(ctx: Ctx, d: dict[str, Any], p: str) -> Fleet | None:
    if not FLEET_KEYS & set(d):
        return None
    if "replicas" not in d:
        raise ctx.error(f"{p}.{sorted(FLEET_KEYS & set(d))[0]}", "a fleet needs replicas: (e.g. [1, 2, 4])")
    if "serve" not in d:
        raise ctx.error(f"{p}.replicas", "a fleet is started from serve: (one replica per {port}); a host: "
                                         "deployment is one server")
    replicas = _list(d["replicas"])
    if not replicas or not all(isinstance(k, int) and not isinstance(k, bool) and 1 <= k <= MAX_REPLICAS
                               for k in replicas) or len(set(replicas)) != len(replicas):
        raise ctx.error(f"{p}.replicas", f"expected distinct replica counts from 1 to {MAX_REPLICAS}, e.g. [1, 2, 4], "
                                         f"got {d['replicas']!r}")
    router = d.get("router", "nginx")
    if router not in ROUTERS:
        raise ctx.error(f"{p}.router", f"expected {' or '.join(ROUTERS)}, got {router!r}")
    kind = ROUTERS[router]
    policies = _list(d.get("policy", kind.default_policy))
    for i, policy in enumerate(policies):
        problem = policy_problem(router, str(policy))
        if problem:
            raise ctx.error(f"{p}.policy" + (f"[{i}]" if isinstance(d.get("policy"), list) else ""), problem)
    if len(set(policies)) != len(policies):
        raise ctx.error(f"{p}.policy", "a policy is listed twice")
    key = d.get("affinity_key", "session")
    if key not in AFFINITY_KEYS:
        raise ctx.error(f"{p}.affinity_key", f"expected {' or '.join(AFFINITY_KEYS)}, got {key!r}")
    if key not in kind.affinity_keys:
        raise ctx.error(f"{p}.affinity_key", f"{router} pins sessions only (X-Llmload-Session-Id: the session, else "
                                             "the prefix); affinity_key: prefix needs router: nginx")
    path = d.get("metrics_path", "/metrics")
    if not isinstance(path, str) or not path.startswith("/"):
        raise ctx.error(f"{p}.metrics_path", f"expected a path like /metrics, got {path!r}")
    return Fleet(replicas=tuple(sorted(replicas)), router=router, policies=tuple(str(x) for x in policies),
                 affinity_key=key, metrics_path=path)
