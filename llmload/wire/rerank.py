"""Rerank and score, pure: the Cohere/Jina ``/v1/rerank`` shape (``query``, ``documents``,
``top_n``; vLLM, TEI, Infinity and llama.cpp serve it) and vLLM's ``/v1/score`` (``text_1``,
``text_2``), and what an answer must be to count: one result per document (or ``top_n`` of them),
each index in range and new, each score a number; the usage's tokens when it has them.

Usage::

    body = rerank_body("bge-reranker", "a query", ["doc one", "doc two"], top_n=1)
    check = check_rerank(answer_bytes, documents=2, top_n=1)     # RankCheck(error=None, prompt_tokens=...)
    body = score_body("bge-reranker", "a query", ["doc one", "doc two"])
    check = check_score(answer_bytes, documents=2)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from llmload.wire.usage import UsageError, checked_count

APIS = ("rerank", "score")


def rerank_body(model: str, query: str, documents: list[str], top_n: int | None = None) -> dict[str, Any]:
    body: dict[str, Any] = {"model": model, "query": query, "documents": documents}
    if top_n is not None:
        body["top_n"] = top_n
    return body


def score_body(model: str, query: str, documents: list[str]) -> dict[str, Any]:
    return {"model": model, "text_1": query, "text_2": documents}


@dataclass(frozen=True, slots=True)
class RankCheck:
    error: str | None
    prompt_tokens: int | None = None


def _parsed(body: bytes, key: str) -> tuple[list | None, int | None, str | None]:
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        return None, None, f"the body is not JSON: {e.__class__.__name__}: {e}"[:200]
    if not isinstance(obj, dict) or not isinstance(obj.get(key), list):
        return None, None, f"expected a JSON object with a {key} list"
    usage = obj.get("usage")
    tokens = None
    if isinstance(usage, dict):  # vLLM and llama.cpp: prompt_tokens; Cohere-style servers: total_tokens
        try:
            tokens = checked_count(usage.get("prompt_tokens"), "prompt_tokens")
            if tokens is None:
                tokens = checked_count(usage.get("total_tokens"), "total_tokens")
        except UsageError as e:
            return None, None, str(e)
    return obj[key], tokens, None


def _ranked(items: list, want: int, documents: int, key: str, score: str) -> str | None:
    if len(items) != want:
        return f"{want} results expected ({documents} documents), got {len(items)}"
    seen: set[int] = set()
    for i, item in enumerate(items):
        if not isinstance(item, dict):
            return f"{key}[{i}]: expected an object"
        index = item.get("index")
        if type(index) is not int or not 0 <= index < documents or index in seen:
            return f"{key}[{i}].index: {json.dumps(index)[:40]} is not a new index in 0..{documents - 1}"
        seen.add(index)
        value = item.get(score)
        if type(value) not in (int, float) or value != value:
            return f"{key}[{i}].{score}: expected a number, got {json.dumps(value)[:40]}"
    return None


def check_rerank(body: bytes, documents: int, top_n: int | None = None) -> RankCheck:
    """A ``/v1/rerank`` answer: ``results`` with min(top_n, documents) entries (all without top_n)."""
    results, tokens, error = _parsed(body, "results")
    if error is not None or results is None:
        return RankCheck(error)
    want = documents if top_n is None else min(top_n, documents)
    return RankCheck(_ranked(results, want, documents, "results", "relevance_score"), tokens)


def check_score(body: bytes, documents: int) -> RankCheck:
    """A ``/v1/score`` answer: ``data`` with one ``score`` per document."""
    data, tokens, error = _parsed(body, "data")
    if error is not None or data is None:
        return RankCheck(error)
    return RankCheck(_ranked(data, documents, documents, "data", "score"), tokens)


def ranked_indices(body: bytes, api: str = "rerank") -> list[int]:
    """The documents' indices, best first, from an answer :func:`check_rerank` (or :func:`check_score`) passed."""
    key, score = ("results", "relevance_score") if api == "rerank" else ("data", "score")
    items = json.loads(body)[key]
    return [item["index"] for item in sorted(items, key=lambda item: -item[score])]
