"""The routers a fleet can have and the policies each one has, in llmload's words and in its own.
Pure.

Usage::

    kind = ROUTERS["nginx"]
    kind.policies["least_conn"]        # "least_conn"
    policy_problem("litellm", "round_robin")   # "litellm has no round_robin; its policies: ..."
"""

from __future__ import annotations

from dataclasses import dataclass

from llmload.sweep.fleet import litellm, nginx


@dataclass(frozen=True)
class RouterKind:
    name: str
    policies: dict[str, str]
    """llmload's policy name → what the router calls it (the generated config uses that)."""
    default_policy: str
    """A fleet of one replica runs with it: there is nothing to choose among."""
    affinity_keys: tuple[str, ...]
    """Which of llmload's affinity headers the router can pin by (``affinity_key:``)."""


ROUTERS: dict[str, RouterKind] = {
    "nginx": RouterKind("nginx", nginx.POLICIES, "round_robin", ("session", "prefix")),
    "litellm": RouterKind("litellm", litellm.POLICIES, "random", ("session",)),
}
AFFINITY_KEYS = ("session", "prefix")


def policy_problem(router: str, policy: str) -> str | None:
    """None when ``router`` has ``policy``, else the one line saying what it has."""
    kind = ROUTERS[router]
    if policy in kind.policies:
        return None
    have = ", ".join(f"{p} ({own})" for p, own in kind.policies.items())
    return f"{router} has no {policy}; its policies: {have}"


def install_problem(router: str) -> str | None:
    """None when the router's program is where llmload runs it from, else how to install it."""
    return nginx.install_problem() if router == "nginx" else litellm.install_problem()
