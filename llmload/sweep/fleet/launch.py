"""A fleet for one cell: K replicas from the deployment's serve: template (each on a free port of
127.0.0.1, ``{replica}`` its index), the router's config written from the plan into the cell's
``router/`` folder, the router started on a free port, and the routing check
(:mod:`~llmload.sweep.fleet.probe`) before the first step. Everything is stopped with
:meth:`Fleet.stop`, whatever happened: the caller calls it in ``finally``, and a start that fails
stops what it had started before it raises. I/O.

Usage::

    fleet = Fleet.start(variant, "out/cells/ID")    # raises ServerError naming the replica or the router
    fleet.url, fleet.metrics_urls, fleet.alive(), fleet.notice_losses(now)
    fleet.stop()
"""

from __future__ import annotations

import json
import os
import secrets
import time
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from llmload.sweep.cells import Variant
from llmload.sweep.fleet import litellm, nginx
from llmload.sweep.fleet.probe import RoutingCheck, check_routing
from llmload.sweep.fleet.routers import ROUTERS, install_problem
from llmload.sweep.server import Server, ServerError, free_port, log_tail

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def served_model(url: str, timeout_s: float = 10.0) -> str:
    """The model a replica serves (its /v1/models' first id): the name LiteLLM routes by."""
    try:
        with _OPENER.open(url + "/v1/models", timeout=timeout_s) as r:
            data = json.loads(r.read())
        return str(data["data"][0]["id"])
    except (OSError, ValueError, KeyError, IndexError, TypeError) as e:
        raise ServerError(f"{url}/v1/models: no model listed ({type(e).__name__}: {e}); the router needs its "
                          "name") from None


@dataclass
class Fleet:
    variant: Variant
    folder: str
    replicas: list[Server] = field(default_factory=list)
    router: Server | None = None
    api_key: str | None = None  # LiteLLM's master key, for the cell's Locust
    check: RoutingCheck | None = None
    lost: dict[int, float] = field(default_factory=dict)  # replica → when its process was seen gone
    model: str = ""

    @property
    def kind(self) -> str:
        fleet = self.variant.deployment.fleet
        assert fleet is not None
        return fleet.router

    @property
    def policy(self) -> str:
        return self.variant.policy or ROUTERS[self.kind].default_policy

    @property
    def url(self) -> str:
        assert self.router is not None
        return self.router.url

    @property
    def metrics_urls(self) -> list[str]:
        fleet = self.variant.deployment.fleet
        assert fleet is not None
        return [r.url + fleet.metrics_path for r in self.replicas]

    @classmethod
    def start(cls, variant: Variant, cell_dir: str) -> Fleet:
        fleet = cls(variant, os.path.join(cell_dir, "router"))
        try:
            fleet._start()
        except BaseException:
            fleet.stop()
            raise
        return fleet

    def _start(self) -> None:
        d = self.variant.deployment
        problem = install_problem(self.kind)
        if problem:
            raise ServerError(problem)
        os.makedirs(self.folder, exist_ok=True)
        for i in range(self.variant.replicas):  # all at once: a fleet starts in one server's time
            port = free_port()
            self.replicas.append(Server.spawn(self.variant.command(port, i), {**d.env, **self.variant.env(port, i)},
                                              os.path.join(os.path.dirname(self.folder), f"replica-{i}.log"),
                                              f"http://127.0.0.1:{port}", f"replica {i}"))
        deadline = time.monotonic() + d.start_timeout_s
        for r in self.replicas:
            r.wait_healthy(d.health, max(1.0, deadline - time.monotonic()))
        self.model = served_model(self.replicas[0].url)
        self._start_router()
        urls = [r.url for r in self.replicas]
        which = self._replica_of
        self.check = check_routing(self.url, self.model, which, len(self.replicas), self.kind, self.api_key)
        problem = self.check.problem(urls)
        if problem:
            raise ServerError(f"{problem}; {self.kind}'s config: {self.config_path}"
                              + (f"; its log ends:\n{log_tail(self.router.log_path)}" if self.router else ""))

    @property
    def config_path(self) -> str:
        return os.path.join(self.folder, nginx.CONF if self.kind == "nginx" else litellm.CONF)

    def _start_router(self) -> None:
        port = free_port()
        fleet = self.variant.deployment.fleet
        assert fleet is not None
        log_path = os.path.join(self.folder, "router.log")
        if self.kind == "nginx":
            text = nginx.config_text([r.url.removeprefix("http://") for r in self.replicas], port, self.policy,
                                     fleet.affinity_key, os.path.abspath(self.folder))
            cmd, env, health = nginx.command(os.path.abspath(self.folder)), {}, nginx.HEALTH_PATH
        else:
            text = litellm.config_text([r.url for r in self.replicas], self.model, self.policy)
            self.api_key = "sk-llmload-" + secrets.token_hex(16)
            cmd, env, health = litellm.command(self.config_path, port), litellm.environment(self.api_key), \
                litellm.HEALTH_PATH
        with open(self.config_path, "w", encoding="utf-8") as f:
            f.write(text)
        self.router = Server.spawn(cmd, env, log_path, f"http://127.0.0.1:{port}", self.kind)
        self.router.wait_healthy(health, 120.0)

    def _replica_of(self, headers: dict[str, str]) -> int | None:
        if self.kind == "litellm":
            return litellm.upstream_index(headers)
        where = nginx.upstream_of(headers)
        ports = [r.url.rsplit(":", 1)[1] for r in self.replicas]
        return ports.index(where.rsplit(":", 1)[1]) if where and where.rsplit(":", 1)[1] in ports else None

    def alive(self) -> bool:
        """The router runs and at least one replica does: the cell can go on with a smaller fleet."""
        return self.router is not None and self.router.alive() and any(r.alive() for r in self.replicas)

    def notice_losses(self, now: float) -> None:
        for i, r in enumerate(self.replicas):
            if i not in self.lost and not r.alive():
                self.lost[i] = now

    def died_text(self) -> str:
        if self.router is not None and not self.router.alive():
            return f"the router ({self.kind}) stopped during the cell: " + self.router.died_text()
        return "every replica of the fleet stopped during the cell: " + "; ".join(r.died_text() for r in self.replicas)

    def describe(self) -> dict[str, Any]:
        fleet = self.variant.deployment.fleet
        assert fleet is not None
        return {"router": self.kind, "policy": self.policy, "affinity_key": fleet.affinity_key,
                "router_url": self.router.url if self.router else None, "config": self.config_path, "model": self.model,
                "replicas": [{"index": i, "url": r.url, "metrics_url": r.url + fleet.metrics_path,
                              "pid": r.proc.pid if r.proc else None} for i, r in enumerate(self.replicas)],
                "router_pid": self.router.proc.pid if self.router and self.router.proc else None,
                "routing_check": {"sent": self.check.sent, "reached": self.check.reached} if self.check else None,
                "processes_lost": [{"index": i, "url": self.replicas[i].url, "noticed_at": round(t, 3)}
                                   for i, t in sorted(self.lost.items())]}

    def stop(self) -> None:
        """The router first (no request reaches a stopping replica), then every replica."""
        if self.router is not None:
            self.router.stop()
        for r in self.replicas:
            r.stop()
