"""The tokenizer-cost workload (``endpoint: tokenize``): one text per request, its length drawn from
``input_tokens``, unique (its first word the request's tag), sent in the server's shape
(``tokenize_format: vllm`` or ``llamacpp``). Pure and seeded.

What it measures is the server's tokenizer on its request path: the latency of a tokenize call
(``e2e_ms``), and through the rows' ``prompt_tokens`` (the ids the server gave back) the tokens it
turns text into per second (the report's ``input tok/s``; ``inputs`` is 1, so ``inputs/s`` is
requests per second).

Usage::

    w = TokenizeWorkload("tok", "Qwen/Qwen3-0.6B", parse_distribution("100-2000", "input_tokens"), seed=7)
    req = w.next_request()      # BodyRequest: the body, inputs 1, the tokens drawn
    w = from_spec(spec, model, context)
"""

from __future__ import annotations

import random

from llmload.wire.protocol import encode_body
from llmload.wire.tokenize import tokenize_body
from llmload.workload.distributions import Distribution
from llmload.workload.endpoints.body import BodyContext, BodyRequest
from llmload.workload.file.spec import WorkloadSpec
from llmload.workload.text import TaggedTexts, TextSource


class TokenizeWorkload:
    def __init__(self, scenario: str, model: str, input_tokens: Distribution, seed: int, fmt: str = "vllm",
                 text: TextSource | None = None) -> None:
        self.scenario, self.model, self.input_tokens, self.fmt, self.text = scenario, model, input_tokens, fmt, text
        self.rng = random.Random(seed)
        self._texts = TaggedTexts(f"t{seed:x}", self.rng, text)

    def next_request(self) -> BodyRequest:
        n = max(1, int(self.input_tokens.sample(self.rng)))
        text = self._texts(n)
        return BodyRequest(self.scenario, encode_body(tokenize_body(self.model, text, self.fmt)), 1, n)


def from_spec(spec: WorkloadSpec, model: str, context: BodyContext) -> TokenizeWorkload:
    """An ``endpoint: tokenize`` workload of a scenario file."""
    b = spec.body
    assert b is not None and b.input_tokens is not None
    return TokenizeWorkload(spec.name, model, b.input_tokens, context.user_seed, b.option("tokenize_format", "vllm"),
                            context.text)
