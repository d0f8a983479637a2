"""What runs in every Locust process (imports locust and gevent): the plugin's wiring, its roles,
the files a run writes, the users, the live view and the web UI.

``get_plugin`` and ``LLMLoadPlugin`` are importable from here as before; they load lazily so
that importing a light submodule (``llmload.plugin.options``) does not build the whole plugin.
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
