"""Model and LoRA-adapter mixes (``models:`` in a scenario): which model each request names. Pure and
seeded: the same run seed draws the same models in every process.

A mix is a list of names with their shares, either given as weights or spread by Zipf's law over N
adapters (rank ``k`` gets ``1 / k**s``, so a few adapters take most of the traffic, as in a
multi-tenant deployment). ``per: request`` draws a model for every request; ``per: session`` draws
one when a session starts (a multi-turn conversation, an agent task, a call graph) and keeps it for
every call of the session; a request outside any session is its own session.

Usage::

    mix = weighted_mix({"base": 0.5, "adapter-a": 0.3, "adapter-b": 0.2})
    mix = zipf_mix(n=16, s=1.1, prefix="adapter-", base="base-model", base_share=0.2, per="session")
    picker = ModelPicker(mix, seed=stable_seed(...))
    picker.pick(session_id="")        # "adapter-a": a new draw (no session)
    picker.pick(session_id="s1-1")    # the model of session s1-1 (drawn at its first request)
"""

from __future__ import annotations

import bisect
import itertools
import random
from collections.abc import Mapping
from dataclasses import dataclass

PER = ("request", "session")


@dataclass(frozen=True)
class ModelMix:
    """The models of a workload and the share of requests (or sessions) each gets."""

    names: tuple[str, ...]
    shares: tuple[float, ...]  # sum to 1, in the order of ``names``
    per: str = "request"  # "request" | "session"

    def share(self, name: str) -> float:
        """The share of ``name`` (0 for a model outside the mix)."""
        return dict(zip(self.names, self.shares, strict=True)).get(name, 0.0)


def weighted_mix(weights: Mapping[str, float], per: str = "request") -> ModelMix:
    """Names and positive weights (any scale) → a mix; raises ValueError on a weight <= 0."""
    if not weights:
        raise ValueError("expected at least one model")
    bad = [n for n, w in weights.items() if not w > 0]
    if bad:
        raise ValueError(f"{bad[0]}: expected a positive weight, got {weights[bad[0]]!r}")
    total = float(sum(weights.values()))
    return ModelMix(tuple(weights), tuple(w / total for w in weights.values()), per)


def zipf_names(n: int, prefix: str, first: int = 1) -> tuple[str, ...]:
    """The adapters' names: ``prefix`` + ``first`` ... ``prefix`` + ``first + n - 1``."""
    return tuple(f"{prefix}{i}" for i in range(first, first + n))


def zipf_mix(n: int, s: float = 1.0, prefix: str = "adapter-", base: str | None = None,
             base_share: float = 0.0, per: str = "request", first: int = 1) -> ModelMix:
    """N adapters by Zipf's law (rank k's weight 1/k**s, the first name the most popular), and the
    base model, if named, taking ``base_share`` of the requests before the adapters share the rest."""
    ranks = [1.0 / (k ** s) for k in range(1, n + 1)]
    total = sum(ranks)
    rest = 1.0 - base_share if base else 1.0
    names = zipf_names(n, prefix, first)
    shares = [rest * r / total for r in ranks]
    if base:
        return ModelMix((base, *names), (base_share, *shares), per)
    return ModelMix(names, tuple(shares), per)


class ModelPicker:
    """Draws the model of each request of one user from a mix (its own seeded RNG)."""

    def __init__(self, mix: ModelMix, seed: int) -> None:
        self.mix = mix
        self._rng = random.Random(seed)
        self._cum = list(itertools.accumulate(mix.shares))
        self._session = ""
        self._model = ""

    def draw(self) -> str:
        i = bisect.bisect_right(self._cum, self._rng.random() * self._cum[-1])
        return self.mix.names[min(i, len(self.mix.names) - 1)]

    def pick(self, session_id: str = "") -> str:
        """The model for the next request: a new draw per request, or per new ``session_id``."""
        if self.mix.per != "session" or not session_id:
            return self.draw()
        if session_id != self._session:  # a user runs its sessions one after another: one to remember
            self._session, self._model = session_id, self.draw()
        return self._model
