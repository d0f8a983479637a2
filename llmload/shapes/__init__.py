"""Load shapes: Locust's ``LoadTestShape`` classes (``load_shapes``; ``search_shape``, the capacity
search; ``warmup_shape``, the warm-up phase in front of any shape) over pure schedules
(``schedules``, ``warmup``) and the capacity search's bisection and step judge (``search``).

The shape classes load lazily, so the pure modules can be imported without Locust.
"""

from __future__ import annotations

from typing import Any

_LAZY = {**{name: "llmload.shapes.load_shapes" for name in ("StepLoadShape", "RampLoadShape", "RateLadderShape")},
         "SearchLoadShape": "llmload.shapes.search_shape"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'llmload.shapes' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
