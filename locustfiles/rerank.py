"""Rerank: `locust -f locustfiles/rerank.py --host http://127.0.0.1:8000`.

A query of 16 tokens with 8-32 passages of 64-256 tokens to `/v1/rerank`, asking for the best 5;
every answer is held to its request (five results, indices in range, scores numbers). Set
`api = "score"` for vLLM's `/v1/score`."""

from llmload import LLMRerankUser


class RerankUser(LLMRerankUser):
    api = "rerank"
    documents = "8-32"
    query_tokens = 16
    document_tokens = "64-256"
    top_n = 5
