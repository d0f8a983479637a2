"""The minimal synthetic chat workload: random text of a fixed or ranged length.

Lengths are ``N`` or ``LOW-HIGH`` (uniform, inclusive), as ``--input-tokens``/``--output-tokens``
take them.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from llmload.workload.request import LLMRequest
from llmload.workload.text import TextSource, unique_text


@dataclass(frozen=True)
class LengthRange:
    low: int
    high: int

    @classmethod
    def parse(cls, text: str | int, what: str) -> LengthRange:
        s = str(text).strip()
        lo, sep, hi = s.partition("-")
        try:
            low = int(lo)
            high = int(hi) if sep else low
        except ValueError:
            raise ValueError(f"{what} {text!r}: expected N or LOW-HIGH (whole numbers of tokens)") from None
        if low < 0 or high < low:
            raise ValueError(f"{what} {text!r}: expected 0 <= LOW <= HIGH")
        return cls(low, high)

    def draw(self, rng: random.Random) -> int:
        return self.low if self.low == self.high else rng.randint(self.low, self.high)


class SyntheticChat:
    """Chat requests with a unique random prompt of ``input_tokens`` and ``max_tokens`` drawn
    from ``output_tokens``. With a ``text`` source (the process's shared corpus) a prompt is a
    slice of it (~2 µs) instead of N random draws (~35 µs for 512 tokens)."""

    def __init__(self, scenario: str, model: str, input_tokens: LengthRange, output_tokens: LengthRange,
                 seed: int, ignore_eos: bool = False, chat: bool = True, text: TextSource | None = None) -> None:
        self.scenario = scenario
        self.model = model
        self.input_tokens = input_tokens
        self.output_tokens = output_tokens
        self.rng = random.Random(seed)
        self.ignore_eos = ignore_eos
        self.chat = chat
        self._n = 0
        self._tag = f"u{seed:x}"
        self.text = text

    def next_request(self) -> LLMRequest:
        self._n += 1
        n_in = self.input_tokens.draw(self.rng)
        tag = f"{self._tag}n{self._n}"
        text = self.text.text(self.rng, n_in, tag) if self.text is not None else unique_text(self.rng, n_in, tag)
        req = LLMRequest(scenario=self.scenario, max_tokens=self.output_tokens.draw(self.rng), model=self.model,
                         input_tokens=n_in)
        if self.chat:
            req.messages = [{"role": "user", "content": text}]
        else:
            req.prompt = text
        if self.ignore_eos:
            req.extra["ignore_eos"] = True
        return req

    def on_reply(self, request: LLMRequest, text: str, ok: bool) -> None:
        pass
