"""Workloads: what each request asks for (prompt, lengths, sessions)."""

from llmload.workload.base import LLMRequest, Workload

__all__ = ["LLMRequest", "Workload"]
