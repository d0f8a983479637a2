"""The mock's simulated speculative decoding (``--spec-decode-acceptance P``): every decode step of
a sequence is one draft of ``tokens`` draft tokens, of which a Binomial(tokens, P) number is
accepted, so the accepted share of draft tokens is P in expectation. Only the counters are
simulated: the mock's token timing does not change. Pure (given its RNG).

The counters are vLLM's (``vllm:spec_decode_num_drafts``, ``..._num_draft_tokens``,
``..._num_accepted_tokens``, ``..._num_accepted_tokens_per_pos{position}``), and SGLang's gauges
are derived from them (``sglang:spec_accept_rate``, ``sglang:spec_accept_length``: accepted
tokens per step, the bonus token included).

Usage::

    spec = SpecDecode(acceptance=0.7, tokens=3, seed=1)
    spec.draft()                    # one decode step's draft
    spec.accepted / spec.draft_tokens
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field


@dataclass
class SpecDecode:
    acceptance: float
    tokens: int = 3
    seed: int = 0
    drafts: int = 0
    draft_tokens: int = 0
    accepted: int = 0
    per_position: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not 0.0 <= self.acceptance <= 1.0:
            raise ValueError(f"--spec-decode-acceptance {self.acceptance!r}: expected a share 0..1")
        if not 1 <= self.tokens <= 16:
            raise ValueError(f"--spec-decode-tokens {self.tokens!r}: expected a whole number 1..16")
        self._rng = random.Random(self.seed ^ 0x5BEC)
        self.per_position = [0] * self.tokens

    def draft(self) -> None:
        rng, p = self._rng, self.acceptance
        n = sum(1 for _ in range(self.tokens) if rng.random() < p)
        self.drafts += 1
        self.draft_tokens += self.tokens
        self.accepted += n
        for i in range(n):
            self.per_position[i] += 1

    @property
    def accept_rate(self) -> float:
        return self.accepted / self.draft_tokens if self.draft_tokens else 0.0

    @property
    def accept_length(self) -> float:
        return 1.0 + self.accepted / self.drafts if self.drafts else 0.0
