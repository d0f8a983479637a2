"""The rerank workload: a query and N passages, their count and lengths drawn from distributions,
unique texts (no cache answers them); for ``/v1/rerank`` (with ``top_n``) or vLLM's ``/v1/score``.
Pure and seeded.

Usage::

    w = RerankWorkload("rerank", "bge-reranker", "rerank", documents=parse_distribution("8-32", "documents"),
                       query_tokens=parse_distribution(16, "q"), document_tokens=parse_distribution(128, "d"), seed=7)
    req = w.next_request()      # BodyRequest: the body, the documents' count (inputs), the tokens drawn
    w = from_spec(spec, "bge-reranker", context)   # an ``endpoint: rerank`` or ``score`` workload
"""

from __future__ import annotations

import random

from llmload.wire.protocol import encode_body
from llmload.wire.rerank import rerank_body, score_body
from llmload.workload.distributions import Distribution
from llmload.workload.endpoints.body import BodyContext, BodyRequest
from llmload.workload.file.spec import WorkloadSpec
from llmload.workload.text import TaggedTexts, TextSource


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
        self._text = TaggedTexts(f"r{seed:x}", self.rng, text)

    def next_request(self) -> BodyRequest:
        rng = self.rng
        q = max(1, int(self.query_tokens.sample(rng)))
        query = self._text(q)
        count = max(1, int(self.documents.sample(rng)))
        lengths = [max(1, int(self.document_tokens.sample(rng))) for _ in range(count)]
        docs = [self._text(n) for n in lengths]
        if self.api == "rerank":  # the check's arguments: the documents' count (and top_n for rerank)
            body, check = rerank_body(self.model, query, docs, self.top_n), (len(docs), self.top_n)
        else:
            body, check = score_body(self.model, query, docs), (len(docs),)
        return BodyRequest(self.scenario, encode_body(body), len(docs), q * len(docs) + sum(lengths), check)


def from_spec(spec: WorkloadSpec, model: str, context: BodyContext) -> RerankWorkload:
    """An ``endpoint: rerank`` or ``score`` workload of a scenario file."""
    b = spec.body
    assert b is not None and b.documents is not None and b.query_tokens is not None and b.document_tokens is not None
    return RerankWorkload(spec.name, model, spec.endpoint, b.documents, b.query_tokens, b.document_tokens,
                          context.user_seed, b.top_n, context.text)
