"""Workloads: what each request asks for (prompt, lengths, sessions)."""

from llmload.workload.request import LLMRequest, Workload

__all__ = ["LLMRequest", "Workload"]
