"""llmload: load-test OpenAI-compatible LLM servers with Locust.

Public names (imported lazily, so `llmload mock` never loads Locust)::

    from llmload import LLMUser, LLMCompletionsUser
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "LLMUser": "llmload.users",
    "LLMCompletionsUser": "llmload.users",
    "users_from_scenario": "llmload.users",
    "load_scenario": "llmload.workload.scenario",
    "LLMRequest": "llmload.workload.base",
    "RequestRecord": "llmload.record",
    "Histogram": "llmload.histogram",
    "FastTransport": "llmload.transport",
    "OpenAITransport": "llmload.transport",
}

__all__ = [*_EXPORTS, "__version__"]


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'llmload' has no attribute {name!r}")
    import importlib

    return getattr(importlib.import_module(module), name)
