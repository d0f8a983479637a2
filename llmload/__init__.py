"""llmload: load-test OpenAI-compatible LLM servers with Locust.

The public names, imported lazily so that ``llmload mock`` and ``llmload report`` never load
Locust; everything else may move between releases::

    from llmload import LLMUser, StepLoadShape

    class ChatUser(LLMUser):
        scenario = "scenarios/chat.yaml"

    class Steps(StepLoadShape):
        steps = (4, 8, 16, 32)
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_EXPORTS = {
    "LLMUser": "llmload.users",
    "LLMCompletionsUser": "llmload.users",
    "users_from_scenario": "llmload.users",
    "StepLoadShape": "llmload.shapes",
    "RampLoadShape": "llmload.shapes",
    "RateLadderShape": "llmload.shapes",
    "SearchLoadShape": "llmload.shapes",
    "load_scenario": "llmload.workload.scenario",
    "LLMRequest": "llmload.workload.base",
    "RequestRecord": "llmload.record",
    "parse_slo": "llmload.slo",
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
