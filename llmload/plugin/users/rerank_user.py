"""``LLMRerankUser``: a query and its passages to ``/v1/rerank`` (Cohere/Jina shape, ``top_n``) or
vLLM's ``/v1/score``, each answer read whole and held to its request (one result per document or
``top_n`` of them, indices in range and new, scores numbers): ``protocol_error`` otherwise. Latency
is ``e2e_ms``; the passages' count (the query-document pairs) goes in ``inputs``, so the report's
``inputs_per_s`` is pairs/s.

Usage::

    class RerankUser(LLMRerankUser):
        api = "rerank"               # or "score" (vLLM's /v1/score)
        documents = "8-32"           # passages per query: N, "LOW-HIGH" or a distribution mapping
        query_tokens = 16
        document_tokens = "64-256"
        top_n = 5                    # rerank only; None: every document ranked
"""

from __future__ import annotations

from typing import Any

from llmload.plugin.users.llm_user import LLMUser
from llmload.plugin.users.whole_body import BodyCalls, body_transport
from llmload.wire.rerank import APIS
from llmload.workload.distributions import SpecError, parse_distribution
from llmload.workload.endpoints.rerank import RerankWorkload


class LLMRerankUser(LLMUser):
    """Ranks passages against a query (see the module docstring)."""

    abstract = True
    endpoint = "rerank"

    api: str = "rerank"
    """``rerank`` (``/v1/rerank``) or ``score`` (vLLM's ``/v1/score``)."""

    documents: Any = 16
    """Passages per request: ``N``, ``"LOW-HIGH"`` or a distribution mapping."""

    query_tokens: Any = 16
    """The query's length in tokens, the same forms."""

    document_tokens: Any = 128
    """Each passage's length in tokens, the same forms."""

    top_n: int | None = None
    """``/v1/rerank``: how many results to ask for; None: every document."""

    def on_start(self) -> None:
        plugin = self.plugin
        name = type(self).__name__
        if self.api not in APIS:
            raise ValueError(f"{name}.api {self.api!r}: expected rerank or score")
        try:
            docs = parse_distribution(self.documents, f"{name}.documents", minimum=1)
            query = parse_distribution(self.query_tokens, f"{name}.query_tokens", minimum=1)
            lengths = parse_distribution(self.document_tokens, f"{name}.document_tokens", minimum=1)
        except SpecError as e:
            raise ValueError(str(e)) from None
        client = plugin.client_for(self.host, plugin.config.client)
        self.transport = body_transport(self.host, self.api, client)
        model = plugin.option("model") or self.model or plugin.resolve_model(self.host, client)
        self.scenario_name = self.api
        if plugin.spans is not None:  # --otlp-endpoint: what its spans name
            plugin.spans.describe(self.scenario_name, self.api, model, self.host)
        text = plugin.shared.text_source(self.run_seed() + plugin.worker_index, None)
        self.ranking = RerankWorkload(self.api, model, self.api, docs, query, lengths, self.seed(), self.top_n, text)
        self._loop = BodyCalls(self, self.api, self.ranking, self.transport)  # LLMUser's task runs it
        try:
            self.transport.connect()
        except OSError:
            pass  # recorded as connect_error by the first request
