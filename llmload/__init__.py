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
    "LLMUser": "llmload.plugin.users.llm_user",
    "LLMCompletionsUser": "llmload.plugin.users.llm_user",
    "LLMEmbeddingsUser": "llmload.plugin.users.embeddings_user",
    "LLMRerankUser": "llmload.plugin.users.rerank_user",
    "LLMAudioUser": "llmload.plugin.users.audio_user",
    "users_from_scenario": "llmload.plugin.users.from_scenario",
    "StepLoadShape": "llmload.shapes.load_shapes",
    "RampLoadShape": "llmload.shapes.load_shapes",
    "RateLadderShape": "llmload.shapes.load_shapes",
    "SearchLoadShape": "llmload.shapes.search_shape",
    "load_scenario": "llmload.workload.file.scenario",
    "LLMRequest": "llmload.workload.request",
    "RequestRecord": "llmload.metrics.record",
    "parse_slo": "llmload.metrics.slo",
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
