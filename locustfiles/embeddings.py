"""Embeddings: `locust -f locustfiles/embeddings.py --host http://127.0.0.1:8000`.

Batches of 1-32 inputs of 64-256 tokens each to `/v1/embeddings`; every answer is held to its
request (one vector per input, of one dimension). `--input-tokens` overrides each input's length."""

from llmload import LLMEmbeddingsUser


class EmbedUser(LLMEmbeddingsUser):
    batch_size = "1-32"
    input_tokens = "64-256"
    encoding_format = "float"
