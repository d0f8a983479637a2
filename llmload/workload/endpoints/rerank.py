"""The rerank workload: a query and N passages, their count and lengths drawn from distributions,
unique texts (no cache answers them); for ``/v1/rerank`` (with ``top_n``) or vLLM's ``/v1/score``.
Pure and seeded.

Usage::

    w = RerankWorkload("rerank", "bge-reranker", "rerank", documents=parse_distribution("8-32", "documents"),
                       query_tokens=parse_distribution(16, "q"), document_tokens=parse_distribution(128, "d"), seed=7)
    req = w.next_request()      # RerankRequest: the body, the documents' count, top_n, the tokens drawn
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from llmload.wire.protocol import encode_body
from llmload.wire.rerank import rerank_body, score_body
from llmload.workload.distributions import Distribution
from llmload.workload.text import TextSource, unique_text


@dataclass(frozen=True, slots=True)
class RerankRequest:
    scenario: str
    body: bytes
    documents: int
    top_n: int | None
    tokens: int


class RerankWorkload:
    """``api`` ``rerank`` or ``score``; ``top_n`` (rerank only) caps the results asked for."""

    def __init__(self, scenario: str, model: str, api: str, documents: Distribution, query_tokens: Distribution,
                 document_tokens: Distribution, seed: int, top_n: int | None = None,
                 text: TextSource | None = None) -> None:
        self.scenario, self.model, self.api = scenario, model, api
        self.documents, self.query_tokens, self.document_tokens = documents, query_tokens, document_tokens
        self.rng = random.Random(seed)
        self.top_n = top_n if api == "rerank" else None
        self.text = text
        self._tag = f"r{seed:x}"
        self._n = 0

    def _text(self, length: int) -> str:
        self._n += 1
        tag = f"{self._tag}n{self._n}"
        return self.text.text(self.rng, length, tag) if self.text is not None else unique_text(self.rng, length, tag)

    def next_request(self) -> RerankRequest:
        rng = self.rng
        q = max(1, int(self.query_tokens.sample(rng)))
        query = self._text(q)
        count = max(1, int(self.documents.sample(rng)))
        lengths = [max(1, int(self.document_tokens.sample(rng))) for _ in range(count)]
        docs = [self._text(n) for n in lengths]
        body = rerank_body(self.model, query, docs, self.top_n) if self.api == "rerank" else \
            score_body(self.model, query, docs)
        return RerankRequest(self.scenario, encode_body(body), len(docs), self.top_n, q * len(docs) + sum(lengths))
