"""The embeddings workload: batches of unique texts, their count drawn from a batch-size
distribution and each one's length from an input-length distribution. Pure and seeded.

The batches are built ahead, once (:class:`BatchPool`: ``POOL_BATCHES`` draws of the two
distributions, their JSON bodies cut where each input starts), and each request draws one and
splices in a tag of its own at the start of every input: a body costs one ``bytes.join``, not a
JSON encoding of new texts (~30 µs for eight 64-token inputs, a fifth of a request's client CPU in
benchmarks/endpoint_embeddings.py), and no two requests share a text, so no cache answers them.

Usage::

    w = EmbeddingsWorkload("embed", "bge-m3", batch_size=parse_distribution("1-32", "batch_size"),
                           input_tokens=parse_distribution(128, "input_tokens"), seed=7)
    req = w.next_request()      # BodyRequest: the encoded body, the batch's size (inputs) and tokens
    w = from_spec(spec, "bge-m3", context)   # an ``endpoint: embeddings`` workload, its pool shared
"""

from __future__ import annotations

import json
import random

from llmload.wire.embeddings import embeddings_body
from llmload.wire.protocol import encode_body
from llmload.workload.distributions import Distribution
from llmload.workload.endpoints.body import BodyContext, BodyRequest
from llmload.workload.file.spec import WorkloadSpec
from llmload.workload.scenario_workload import stable_seed
from llmload.workload.text import TextSource, words

POOL_BATCHES = 256  # batches drawn ahead: the batch-size distribution as 256 samples
POOL_BYTES = 16 << 20  # ... or fewer, once their bodies hold 16 MiB


class BatchPool:
    """Batches drawn ahead: each the body's pieces between the inputs' starts (``tag.join(pieces)``
    is the body, every input beginning with ``tag``), its inputs and its tokens. One per workload
    and process (users draw from it with their own seeds and tags)."""

    def __init__(self, model: str, batch_size: Distribution, input_tokens: Distribution, seed: int,
                 encoding_format: str = "float", dimensions: int | None = None, text: TextSource | None = None,
                 size: int = POOL_BATCHES, max_bytes: int = POOL_BYTES) -> None:
        rng = random.Random(seed)
        head = encode_body({"model": model})[:-1] + b',"input":["'
        options = encode_body(embeddings_body(model, [], encoding_format, dimensions))
        tail = b'"],' + options[options.index(b'"encoding_format"'):]  # the keys after "input", as the body has them
        self.batches: list[tuple[list[bytes], int, int]] = []
        held = 0
        while len(self.batches) < max(1, size) and held < max_bytes:
            n = max(1, int(batch_size.sample(rng)))
            pieces, tokens = [head], 0
            for i in range(n):
                length = max(1, int(input_tokens.sample(rng)))
                tokens += length
                # the input's first word is the request's tag + "k{i}" (unique within the batch): one word
                rest = "" if length == 1 else text.text(rng, length - 1) if text is not None else words(rng, length - 1)
                piece = json.dumps(f"k{i} {rest}" if rest else f"k{i}", ensure_ascii=False)[1:-1].encode()
                pieces.append(piece + (b'","' if i < n - 1 else tail))
            self.batches.append((pieces, n, tokens))
            held += sum(len(p) for p in pieces)


class EmbeddingsWorkload:
    """Batches of ``batch_size`` inputs (at least 1) of ``input_tokens`` tokens each (at least 1),
    ``encoding_format`` float or base64, ``dimensions`` when given. ``pool``: batches built ahead and
    shared (else its own, from ``seed``)."""

    def __init__(self, scenario: str, model: str, batch_size: Distribution, input_tokens: Distribution, seed: int,
                 encoding_format: str = "float", dimensions: int | None = None,
                 text: TextSource | None = None, pool: BatchPool | None = None) -> None:
        self.scenario = scenario
        self.model = model
        self.batch_size = batch_size
        self.input_tokens = input_tokens
        self.rng = random.Random(seed)
        self.encoding_format = encoding_format
        self.dimensions = dimensions
        self.pool = pool or BatchPool(model, batch_size, input_tokens, seed, encoding_format, dimensions, text)
        self._tag = b"e%xn" % seed
        self._n = 0

    def next_request(self) -> BodyRequest:
        batches = self.pool.batches
        pieces, n, tokens = batches[self.rng.randrange(len(batches))]
        self._n += 1
        return BodyRequest(self.scenario, (self._tag + b"%x" % self._n).join(pieces), n, tokens,
                           (n, self.dimensions, self.encoding_format))


def shared_workload(scenario: str, model: str, batch_size: Distribution, input_tokens: Distribution,
                    encoding_format: str, dimensions: int | None, context: BodyContext) -> EmbeddingsWorkload:
    """A user's batches, drawn from a pool built once per process and workload (the same in every run
    with the same ``--seed``; a new test's seed: new batches), each request with the user's own tag."""
    key = ("embeddings", scenario, model, repr(batch_size), repr(input_tokens), encoding_format, dimensions)
    pool = context.cached(key, lambda: BatchPool(
        model, batch_size, input_tokens, stable_seed(context.run_seed, scenario, context.worker), encoding_format,
        dimensions, context.text), context.run_seed)
    return EmbeddingsWorkload(scenario, model, batch_size, input_tokens, context.user_seed, encoding_format,
                              dimensions, pool=pool)


def from_spec(spec: WorkloadSpec, model: str, context: BodyContext) -> EmbeddingsWorkload:
    """An ``endpoint: embeddings`` workload of a scenario file."""
    b = spec.body
    assert b is not None and b.batch_size is not None and b.input_tokens is not None
    return shared_workload(spec.name, model, b.batch_size, b.input_tokens, b.encoding_format, b.dimensions, context)
