"""What runs in every Locust process (imports locust and gevent). The wiring (``wiring``, the composition
root) is here; the rooms below hold the rest, each importing only the rooms its docstring names:
``options`` (the flags and their checks) ← ``output`` (what a run writes and shows) ← ``run`` (its
configuration and life) ← ``cluster`` (roles, links, messages) ← ``web`` (the web UI) and ``users``
(the user classes and their loops).

``get_plugin`` and ``LLMLoadPlugin`` are importable from here as before; they load lazily so
that importing a light submodule (``llmload.plugin.options.flags``) does not build the whole plugin.
"""

from __future__ import annotations

from typing import Any

_LAZY = {"get_plugin": "llmload.plugin.wiring", "LLMLoadPlugin": "llmload.plugin.wiring"}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'llmload.plugin' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
