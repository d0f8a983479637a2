"""Fault specs for the mock: `X-Mock-Fault` header values and `--fault VALUE=RATE` flags.

Values: ``429``, ``500``, ``503`` (error response), ``disconnect:K`` (close the connection after K
tokens), ``malformed:K`` (a broken SSE event after K tokens), ``stream_error:K`` (an error object
inside the stream after K tokens, then the stream ends), ``stall:S`` (pause S seconds after the
first token), ``slow_first:S`` (S extra seconds before the first token), ``missing_vector``
(/v1/embeddings: the answer leaves the last input's vector out), ``wrong_index`` (/v1/rerank,
/v1/score: the first result's index is past the last document), ``missing_text`` (/v1/audio/transcriptions:
an answer without text) and ``no_final_chunk`` (/v1/audio/transcriptions: a stream that ends without
its finish reason and ``[DONE]``; a whole answer cut inside its JSON).
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from llmload.wire.endpoints import ENDPOINTS

HTTP_FAULTS = {"429": 429, "500": 500, "503": 503}
COUNT_FAULTS = ("disconnect", "malformed", "stream_error")
SECONDS_FAULTS = ("stall", "slow_first")
# The faults of one endpoint each (a vector left out, an index out of range, ...), as each declares them.
PLAIN_FAULTS = tuple(f for e in ENDPOINTS for f in e.faults)


@dataclass(frozen=True, slots=True)
class Fault:
    kind: str  # "http", "disconnect", "malformed", "stream_error", "stall", "slow_first"
    status: int = 0
    after_tokens: int = 0
    seconds: float = 0.0

    @property
    def spec(self) -> str:
        if self.kind == "http":
            return str(self.status)
        if self.kind in COUNT_FAULTS:
            return f"{self.kind}:{self.after_tokens}"
        if self.kind in PLAIN_FAULTS:
            return self.kind
        return f"{self.kind}:{self.seconds:g}"


def parse_fault(value: str) -> Fault:
    """Parse one fault value; raises ValueError naming what is wrong."""
    v = value.strip()
    if v in HTTP_FAULTS:
        return Fault("http", status=HTTP_FAULTS[v])
    if v in PLAIN_FAULTS:
        return Fault(v)
    kind, sep, arg = v.partition(":")
    if kind in COUNT_FAULTS:
        if not sep or not arg.isdigit():
            raise ValueError(f"fault {value!r}: expected {kind}:K with K a whole number of tokens")
        return Fault(kind, after_tokens=int(arg))
    if kind in SECONDS_FAULTS:
        try:
            seconds = float(arg)
        except ValueError:
            seconds = -1.0
        if not sep or seconds < 0:
            raise ValueError(f"fault {value!r}: expected {kind}:S with S seconds >= 0")
        return Fault(kind, seconds=seconds)
    known = ", ".join([*HTTP_FAULTS, *(f"{k}:K" for k in COUNT_FAULTS), *(f"{k}:S" for k in SECONDS_FAULTS),
                       *PLAIN_FAULTS])
    raise ValueError(f"unknown fault {value!r}; expected one of {known}")


def parse_fault_rate(flag: str) -> tuple[Fault, float]:
    """Parse a ``--fault VALUE=RATE`` flag (RATE a probability in [0, 1])."""
    value, sep, rate_text = flag.rpartition("=")
    if not sep:
        raise ValueError(f"--fault {flag!r}: expected VALUE=RATE, e.g. 429=0.05 or disconnect:10=0.01")
    try:
        rate = float(rate_text)
    except ValueError:
        rate = -1.0
    if not 0.0 <= rate <= 1.0:
        raise ValueError(f"--fault {flag!r}: RATE must be a probability between 0 and 1, got {rate_text!r}")
    return parse_fault(value), rate


class FaultPicker:
    """Chooses at most one fault per request: the header wins, else the rates, seeded."""

    def __init__(self, rates: list[tuple[Fault, float]], seed: int = 0) -> None:
        total = sum(r for _, r in rates)
        if total > 1.0 + 1e-9:
            raise ValueError(f"--fault rates add up to {total:g}; they must add up to at most 1")
        self._rates = rates
        self._rng = random.Random(seed)

    def pick(self, header: str | None) -> Fault | None:
        if header:
            return parse_fault(header)
        if not self._rates:
            return None
        x = self._rng.random()
        for fault, rate in self._rates:
            if x < rate:
                return fault
            x -= rate
        return None
