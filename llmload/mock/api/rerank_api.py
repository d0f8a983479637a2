"""``POST /v1/rerank`` (Cohere/Jina shape) and ``POST /v1/score`` (vLLM's) as the mock serves them:
the body parsed, and the answer: ``results`` sorted by ``relevance_score`` (the ``top_n`` best),
or ``data`` with one ``score`` per document, and ``usage``. The cost is per pair: the embeddings'
batcher (:class:`llmload.mock.api.embeddings_api.EmbeddingBatcher`) with each request weighing its
query-document pairs, ``--rerank-per-pair-ms`` each. Scores are a hash of each document, so the
ranking is deterministic. Pure but the batcher.

Usage::

    req = parse_rank_body(body_bytes, "/v1/rerank", "mock")
    answer = rank_response(req, "mock", wrong_index=False)
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass

from llmload.mock.api.openai_api import BadRequest, _int_field, json_object


@dataclass(frozen=True, slots=True)
class RankRequest:
    api: str  # "rerank" or "score"
    model: str
    pairs: int
    tokens: int
    scores: tuple[float, ...]
    top_n: int | None


def parse_rank_body(body_bytes: bytes, path: str, default_model: str) -> RankRequest:
    body = json_object(body_bytes)
    rerank = path == "/v1/rerank"
    qkey, dkey = ("query", "documents") if rerank else ("text_1", "text_2")
    query, docs = body.get(qkey), body.get(dkey)
    if isinstance(docs, str):
        docs = [docs]
    if not isinstance(query, str) or not isinstance(docs, list) or not docs or \
            not all(isinstance(d, str) for d in docs):
        raise BadRequest(f"{qkey}: expected a string and {dkey}: a non-empty list of strings")
    q = len(query.split())
    return RankRequest("rerank" if rerank else "score", str(body.get("model") or default_model), len(docs),
                       sum(q + len(d.split()) for d in docs),
                       tuple((zlib.crc32(d.encode()) % 10_000) / 10_000 for d in docs),
                       _int_field(body, "top_n") if rerank else None)


def rank_response(req: RankRequest, model: str, wrong_index: bool = False) -> bytes:
    """The answer; ``wrong_index`` (the fault of that name) gives the first result an index past the end."""
    usage = {"prompt_tokens": req.tokens, "total_tokens": req.tokens}
    if req.api == "score":
        data = [{"index": i, "object": "score", "score": s} for i, s in enumerate(req.scores)]
        if wrong_index:
            data[0]["index"] = req.pairs
        return json.dumps({"id": "score-mock", "object": "list", "model": model, "data": data,
                           "usage": usage}).encode()
    order = sorted(range(req.pairs), key=lambda i: -req.scores[i])
    if req.top_n is not None:
        order = order[:req.top_n]
    results = [{"index": i, "relevance_score": req.scores[i]} for i in order]
    if wrong_index and results:
        results[0]["index"] = req.pairs
    return json.dumps({"id": "rerank-mock", "model": model, "usage": usage, "results": results}).encode()
