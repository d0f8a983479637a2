"""The embeddings workload: batches of unique texts, their count drawn from a batch-size
distribution and each one's length from an input-length distribution. Pure and seeded.

Usage::

    w = EmbeddingsWorkload("embed", "bge-m3", batch_size=parse_distribution("1-32", "batch_size"),
                           input_tokens=parse_distribution(128, "input_tokens"), seed=7)
    req = w.next_request()      # EmbeddingsRequest: the encoded body, the batch's size and tokens
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from llmload.wire.embeddings import embeddings_body
from llmload.wire.protocol import encode_body
from llmload.workload.distributions import Distribution
from llmload.workload.text import TextSource, unique_text


@dataclass(frozen=True, slots=True)
class EmbeddingsRequest:
    """One batch to send: its body, how many inputs it has and how many tokens they were drawn as."""

    scenario: str
    body: bytes
    inputs: int
    input_tokens: int


class EmbeddingsWorkload:
    """Batches of ``batch_size`` inputs (at least 1) of ``input_tokens`` tokens each (at least 1),
    ``encoding_format`` float or base64, ``dimensions`` when given."""

    def __init__(self, scenario: str, model: str, batch_size: Distribution, input_tokens: Distribution, seed: int,
                 encoding_format: str = "float", dimensions: int | None = None,
                 text: TextSource | None = None) -> None:
        self.scenario = scenario
        self.model = model
        self.batch_size = batch_size
        self.input_tokens = input_tokens
        self.rng = random.Random(seed)
        self.encoding_format = encoding_format
        self.dimensions = dimensions
        self.text = text
        self._tag = f"e{seed:x}"
        self._n = 0

    def next_request(self) -> EmbeddingsRequest:
        rng = self.rng
        n = max(1, int(self.batch_size.sample(rng)))
        texts, tokens = [], 0
        for _ in range(n):
            self._n += 1
            length = max(1, int(self.input_tokens.sample(rng)))
            tag = f"{self._tag}n{self._n}"
            texts.append(self.text.text(rng, length, tag) if self.text is not None else unique_text(rng, length, tag))
            tokens += length
        body = encode_body(embeddings_body(self.model, texts, self.encoding_format, self.dimensions))
        return EmbeddingsRequest(self.scenario, body, n, tokens)
