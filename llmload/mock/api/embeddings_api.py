"""``POST /v1/embeddings`` as the mock serves it: the body parsed (``input`` a string or a list of
strings, ``encoding_format`` float or base64, ``dimensions``), a cost model that batches by tokens,
and the answer in OpenAI's shape (``data: [{object, index, embedding}]``, ``usage.prompt_tokens``).

The cost model is an encoder's: requests wait in one queue; each step takes the queue's head up to
``batch_tokens`` tokens (at least one request) and lasts ``base_ms + per_token_ms × its tokens``;
every request of the step is answered when it ends. A token is a whitespace-separated word, as for
chat. With ``per_token_ms`` 0 every step is ``base_ms`` long: the fixed-latency server of the
speed benchmark.

Usage::

    req = parse_embeddings_body(body_bytes, "mock", default_dim=384)
    batcher = EmbeddingBatcher(base_ms=2.0, per_token_ms=0.01, batch_tokens=16384)
    batcher.run(req.tokens)                     # blocks this greenlet until its step ends
    answer = embeddings_response(req, "mock", drop_one=False)
"""

from __future__ import annotations

import base64
import json
import struct
from collections import deque
from dataclasses import dataclass
from functools import lru_cache
from time import perf_counter

import gevent
import gevent.event

from llmload.mock.api.openai_api import BadRequest, _int_field, json_object


@dataclass(frozen=True, slots=True)
class EmbeddingsRequest:
    model: str
    inputs: int
    tokens: int
    dimensions: int
    encoding_format: str


def parse_embeddings_body(body_bytes: bytes, default_model: str, default_dim: int) -> EmbeddingsRequest:
    body = json_object(body_bytes)
    given = body.get("input")
    texts = [given] if isinstance(given, str) else given
    if not isinstance(texts, list) or not texts or not all(isinstance(t, str) for t in texts):
        raise BadRequest("input: expected a string or a non-empty list of strings")
    fmt = body.get("encoding_format") or "float"
    if fmt not in ("float", "base64"):
        raise BadRequest(f"encoding_format: expected float or base64, got {fmt!r}")
    dims = _int_field(body, "dimensions")
    if dims == 0:
        raise BadRequest("dimensions: expected a positive integer")
    return EmbeddingsRequest(model=str(body.get("model") or default_model), inputs=len(texts),
                             tokens=sum(len(t.split()) for t in texts), dimensions=dims or default_dim,
                             encoding_format=fmt)


@lru_cache(maxsize=16)
def _vector(dimensions: int, encoding_format: str) -> str:
    """One vector's JSON text (the same for every input: the mock's cost is the batching, not maths)."""
    values = [round(((i * 7919) % 1000) / 1000.0 - 0.5, 3) for i in range(dimensions)]
    if encoding_format == "base64":
        return json.dumps(base64.b64encode(struct.pack(f"<{dimensions}f", *values)).decode())
    return json.dumps(values, separators=(",", ":"))


def embeddings_response(req: EmbeddingsRequest, model: str, drop_one: bool = False) -> bytes:
    """OpenAI's answer; ``drop_one`` (the ``missing_vector`` fault) leaves the last input's vector out."""
    vec = _vector(req.dimensions, req.encoding_format)
    n = req.inputs - 1 if drop_one else req.inputs
    items = ",".join(f'{{"object":"embedding","index":{i},"embedding":{vec}}}' for i in range(n))
    usage = f'{{"prompt_tokens":{req.tokens},"total_tokens":{req.tokens}}}'
    return f'{{"object":"list","data":[{items}],"model":{json.dumps(model)},"usage":{usage}}}'.encode()


class EmbeddingBatcher:
    """One queue, steps batched by tokens (see the module docstring). ``steps``, ``batched_requests``:
    counters for /metrics and tests."""

    def __init__(self, base_ms: float, per_token_ms: float, batch_tokens: int) -> None:
        self.base_s = base_ms / 1000.0
        self.per_token_s = per_token_ms / 1000.0
        self.batch_tokens = batch_tokens
        self._queue: deque[tuple[int, gevent.event.AsyncResult]] = deque()
        self._wake = gevent.event.Event()
        self._loop: gevent.Greenlet | None = None
        self.steps = 0
        self.batched_requests = 0

    def run(self, tokens: int) -> float:
        """Wait (this greenlet) until a step has embedded these ``tokens``; the step's start (perf_counter)."""
        if self._loop is None:
            self._loop = gevent.spawn(self._steps)
        done = gevent.event.AsyncResult()
        self._queue.append((tokens, done))
        self._wake.set()
        return done.get()

    def _steps(self) -> None:
        queue = self._queue
        while True:
            if not queue:
                self._wake.clear()
                self._wake.wait()
                continue
            batch, tokens = [], 0
            while queue and (not batch or tokens + queue[0][0] <= self.batch_tokens):
                t, done = queue.popleft()
                batch.append(done)
                tokens += t
            start = perf_counter()
            gevent.sleep(self.base_s + self.per_token_s * tokens)
            self.steps += 1
            self.batched_requests += len(batch)
            for done in batch:
                done.set(start)

    def stop(self) -> None:
        if self._loop is not None:
            self._loop.kill()
            self._loop = None
