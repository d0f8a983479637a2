"""One Locust user class per workload of a scenario file, weighted as the file says, so that each keeps
its own rows, SLOs and report section (``users_from_scenario``, a public name of ``llmload``).
"""

from __future__ import annotations

import math
import re
import sys
from fractions import Fraction
from typing import Any

from llmload.plugin.users.llm_user import LLMUser
from llmload.workload.file.scenario import load_scenario_cached, resolve_scenario_path


def integer_weights(weights: list[float]) -> list[int]:
    """Locust wants whole weights: the smallest whole numbers in the same ratio (to 1/100)."""
    fractions = [Fraction(w).limit_denominator(100) for w in weights]
    scale = math.lcm(*(f.denominator for f in fractions))
    ints = [int(f * scale) for f in fractions]
    g = math.gcd(*ints)
    return [max(1, i // g) for i in ints]


def users_from_scenario(path: str, base: type[LLMUser] = LLMUser, **attrs: Any) -> dict[str, type[LLMUser]]:
    """One Locust user class per workload of a scenario file, weighted as the file says, so each
    keeps its own rows, SLOs and report section::

        globals().update(users_from_scenario("scenarios/mixed.yaml"))
    """
    frame = sys._getframe(1)
    resolved = resolve_scenario_path(path, frame.f_globals.get("__file__", "."))
    spec = load_scenario_cached(resolved)
    weights = integer_weights([w.weight for w in spec.workloads])
    classes: dict[str, type[LLMUser]] = {}
    for w, weight in zip(spec.workloads, weights, strict=True):
        name = "".join(part.capitalize() for part in re.split(r"[^0-9A-Za-z]+", w.name) if part) + "User"
        classes[name] = type(name, (base,), {
            "abstract": False, "scenario": resolved, "workload": w.name,
            "weight": weight, "__module__": frame.f_globals.get("__name__", __name__),
            **attrs,
        })
    return classes
