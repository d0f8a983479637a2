"""Embeddings, pure: what a response must be for the request to count (one vector per input, every
index once, the right dimension, floats or base64 float32), the record it makes, and the workload's
batches."""

from __future__ import annotations

import base64
import json
import struct

import pytest

from llmload.metrics import record as R
from llmload.wire.embeddings import check_embeddings, embeddings_body
from llmload.workload.distributions import parse_distribution
from llmload.workload.endpoints.embeddings import EmbeddingsWorkload


def answer(vectors: list, usage: dict | None = None, indices: list | None = None) -> bytes:
    data = [{"object": "embedding", "index": i if indices is None else indices[i], "embedding": v}
            for i, v in enumerate(vectors)]
    return json.dumps({"object": "list", "data": data, "usage": usage or {"prompt_tokens": 7}}).encode()


def b64(values: list[float]) -> str:
    return base64.b64encode(struct.pack(f"<{len(values)}f", *values)).decode()


def test_a_whole_answer_passes_with_its_tokens_and_dimension():
    check = check_embeddings(answer([[0.1, 0.2, 0.3], [1, 0, -1]]), inputs=2)
    assert (check.error, check.prompt_tokens, check.dimension) == (None, 7, 3)
    assert check_embeddings(answer([b64([0.5] * 8)]), 1, dimensions=8, encoding_format="base64").error is None
    shuffled = answer([[0.1], [0.2]], indices=[1, 0])
    assert check_embeddings(shuffled, 2).error is None


@pytest.mark.parametrize(("body", "inputs", "dims", "fmt", "error"), [
    (answer([[0.1, 0.2]]), 2, None, "float", "2 inputs, 1 vectors"),
    (answer([[0.1], [0.2]], indices=[0, 0]), 2, None, "float", "data[1].index: 0 is not a new index in 0..1"),
    (answer([[0.1], [0.2]], indices=[0, 5]), 2, None, "float", "data[1].index: 5 is not a new index"),
    (answer([[0.1, 0.2], [0.3]]), 2, None, "float", "data[1].embedding: 1 values, expected 2, as data[0]'s"),
    (answer([[0.1, 0.2]]), 1, 3, "float", "data[0].embedding: 2 values, expected 3 (dimensions)"),
    (answer([[0.1, None]]), 1, None, "float", "data[0].embedding: expected numbers, got null"),
    (answer([[]]), 1, None, "float", "an empty vector"),
    (answer([[0.1]]), 1, None, "base64", "expected a base64 string (encoding_format base64), got list"),
    (answer(["%%%"]), 1, None, "base64", "not valid base64"),
    (answer([base64.b64encode(b"abc").decode()]), 1, None, "base64", "3 bytes is not a whole number of float32"),
    (b'{"data": [{"embedding": [0.1', 1, None, "float", "the body is not JSON"),
    (b'[1, 2]', 1, None, "float", "expected a JSON object with a data list"),
    (answer([[0.1]], usage={"prompt_tokens": -3}), 1, None, "float", "usage.prompt_tokens"),
])
def test_a_short_or_garbled_answer_says_what_is_wrong(body, inputs, dims, fmt, error):
    check = check_embeddings(body, inputs, dims, fmt)
    assert check.error is not None and error in check.error, check.error


def test_the_record_is_ok_with_latency_as_e2e_or_a_protocol_error():
    meta = R.RequestMeta("r", 0.0, "embed", inputs=4)
    ok = R.whole_body_record(meta, 12.5, 200, None, 40)
    assert (ok.status, ok.e2e_ms, ok.prompt_tokens, ok.completion_tokens, ok.ttft_ms) == ("ok", 12.5, 40, 0, None)
    assert dict(zip(R.CSV_COLUMNS, ok.row(), strict=True))["inputs"] == 4
    bad = R.whole_body_record(meta, 3.0, 200, "4 inputs, 3 vectors", 40)
    assert bad.status == R.PROTOCOL_ERROR and bad.error == "4 inputs, 3 vectors"


def test_the_workload_draws_batches_and_lengths_reproducibly():
    def batches(seed: int) -> list:
        w = EmbeddingsWorkload("embed", "m", parse_distribution("1-8", "batch_size", minimum=1),
                               parse_distribution(5, "input_tokens", minimum=1), seed, "base64", 64)
        return [w.next_request() for _ in range(50)]

    first = batches(3)
    assert [r.body for r in first] == [r.body for r in batches(3)]
    assert {r.inputs for r in first} == set(range(1, 9)) and all(r.tokens == 5 * r.inputs for r in first)
    body = json.loads(first[0].body)
    assert body["encoding_format"] == "base64" and body["dimensions"] == 64 and len(body["input"]) == first[0].inputs
    assert len(set(body["input"])) == len(body["input"])  # unique texts: no cache answers them
    assert embeddings_body("m", ["a"]) == {"model": "m", "input": ["a"], "encoding_format": "float"}


def test_the_byte_fast_path_passes_only_what_the_full_check_passes():
    from llmload.wire.embeddings import _fast_check, full_check

    llamacpp = (b'{"model":"tiny","object":"list","usage":{"prompt_tokens":9,"total_tokens":9},"data":['
                b'{"embedding":[0.1,-2e-3,3],"index":1,"object":"embedding"},'
                b'{"embedding":[1.5,0,0.25],"index":0,"object":"embedding"}]}')
    spaced = answer([[0.1, 0.2], [0.3, 0.4]])
    named = b'{"model":"text-embedding-3-small","data":[{"object":"embedding","index":0,"embedding":[1,2]}]}'
    for body, inputs in ((llamacpp, 2), (spaced, 2), (named, 1)):
        fast = _fast_check(body, inputs, None, "float")
        assert fast is not None and fast == full_check(body, inputs, None, "float")
    garbled = [answer([[0.1, 0.2]]), answer([[0.1], [0.2]], indices=[0, 0]), answer([[0.1, 0.2], [0.3]]),
               answer([["x", 0.2]]), answer([[]]), b'{"data":[{"index":0,"embedding":[0.1,0.2,]}]}',
               b'{"data":[{"index":0,"embedding":[ ,0.2]}]}',
               b'{"data":[{"index":0,"embedding":[0.1,0.2]}]', b'{"data":[{"index":0,"embedding":[0.1,"a]"]}]}']
    for body in garbled:
        assert _fast_check(body, 2 if body is garbled[0] else 1, None, "float") is None, body


def test_the_compact_path_passes_exactly_what_the_full_check_passes():
    from llmload.wire.embeddings import _compact_check, full_check

    vllm = (b'{"id":"embd-1","object":"list","created":1,"model":"bge","data":['
            b'{"index":0,"object":"embedding","embedding":[0.1,-2e-3,3]},'
            b'{"index":1,"object":"embedding","embedding":[1.5,0,0.25]}],'
            b'"usage":{"prompt_tokens":9,"total_tokens":9,"completion_tokens":0,"prompt_tokens_details":null}}')
    tei = (b'{"object":"list","data":[{"object":"embedding","embedding":[1,2],"index":0},'
           b'{"object":"embedding","embedding":[3,4],"index":1}],"model":"m","usage":{"prompt_tokens":4}}')
    b64s = answer([b64([0.5] * 8), b64([1.0] * 8)]).replace(b": ", b":").replace(b", ", b",")
    no_usage = b'{"data":[{"index":0,"embedding":[1,2,3]}]}'
    twelve = b'{"data":[' + b",".join(b'{"index":%d,"embedding":[1,2]}' % i for i in range(12)) + b']}'
    for body, inputs, fmt in ((vllm, 2, "float"), (tei, 2, "float"), (b64s, 2, "base64"), (no_usage, 1, "float"),
                              (twelve, 12, "float")):
        fast = _compact_check(body, inputs, None, fmt)
        assert fast is not None and fast == full_check(body, inputs, None, fmt), body
    assert _compact_check(vllm, 2, 3, "float") == full_check(vllm, 2, 3, "float")

    def compact(obj: dict) -> bytes:
        return json.dumps(obj, separators=(",", ":")).encode()

    def items(vectors: list, indices: list) -> list:
        return [{"index": i, "object": "embedding", "embedding": v} for i, v in zip(indices, vectors, strict=True)]

    garbled = [  # (body, inputs, dimensions, format): each one the full check refuses
        (compact({"data": items([[0.1, 0.2]], [0])}), 2, None, "float"),  # a missing vector
        (compact({"data": items([[0.1], [0.2]], [0, 0])}), 2, None, "float"),  # an index twice
        (compact({"data": items([[0.1], [0.2]], [0, 2])}), 2, None, "float"),  # an index out of range
        (compact({"data": items([[0.1], [0.2]], [1, 0])}), 2, None, "float"),  # out of order: the slower paths
        (compact({"data": items([[0.1], [0.2], [0.3]], [0, 1, 2])}), 2, None, "float"),  # one vector too many
        (compact({"data": items([[0.1, 0.2], [0.3]], [0, 1])}), 2, None, "float"),  # a wrong dimension
        (compact({"data": items([[0.1, 0.2]], [0])}), 1, 3, "float"),  # not the dimensions asked for
        (compact({"data": items([["x", 0.2]], [0])}), 1, None, "float"),
        (compact({"data": items([[None, 0.2]], [0])}), 1, None, "float"),
        (compact({"data": items([[[0.1], 0.2]], [0])}), 1, None, "float"),
        (compact({"data": items([[]], [0])}), 1, None, "float"),
        (b'{"data":[{"index":0,"embedding":[0.1,0.2,]}]}', 1, None, "float"),
        (b'{"data":[{"index":0,"embedding":[,0.2]}]}', 1, None, "float"),
        (b'{"data":[{"index":0,"embedding":[0.1,0.2]}]', 1, None, "float"),
        (b'{"data":[{"index":0,"embedding":[1]},{"index":12,"embedding":[2]}]}', 2, None, "float"),  # 1 of 12
        (compact({"data": items(["%%%="], [0])}), 1, None, "base64"),
        (compact({"data": items([base64.b64encode(b"abc").decode()], [0])}), 1, None, "base64"),
        (compact({"data": items([b64([0.5] * 4)], [0])}), 1, 8, "base64"),
        (compact({"data": items([[0.1]], [0]), "usage": {"prompt_tokens": -3}}), 1, None, "float"),
    ]
    for body, inputs, dims, fmt in garbled:
        assert _compact_check(body, inputs, dims, fmt) is None, body
        if (body, inputs) != (garbled[3][0], 2):
            assert check_embeddings(body, inputs, dims, fmt).error is not None, body


def test_batches_are_built_ahead_and_each_request_gets_unique_texts():
    from llmload.workload.endpoints.embeddings import BatchPool

    batch, lengths = parse_distribution("1-8", "batch_size", minimum=1), parse_distribution("3-9", "t", minimum=1)
    pool = BatchPool("m", batch, lengths, seed=5, size=64)
    assert len(pool.batches) == 64
    w = EmbeddingsWorkload("embed", "m", batch, lengths, 11, pool=pool)
    seen: set[str] = set()
    for _ in range(200):
        req = w.next_request()
        body = json.loads(req.body)
        assert body == {"model": "m", "input": body["input"], "encoding_format": "float"}
        assert len(body["input"]) == req.inputs and sum(len(t.split()) for t in body["input"]) == req.tokens
        assert not seen & set(body["input"])  # no text sent twice: no cache answers one
        seen |= set(body["input"])
    assert len(BatchPool("m", batch, lengths, seed=5, max_bytes=1).batches) == 1  # bounded by bytes, at least one


def test_the_batch_pool_is_one_per_run_seed_and_a_new_seed_drops_the_old_pools():
    import types

    from llmload.plugin.users.whole_body import body_context
    from llmload.workload.endpoints.embeddings import shared_workload
    from llmload.workload.shared import SharedState

    shared = SharedState(lambda: 1, lambda: None)
    opts = {"seed": 1}
    plugin = types.SimpleNamespace(option=lambda name, default=None: opts.get(name, default), shared=shared,
                                   worker_index=0)
    user = types.SimpleNamespace(plugin=plugin, seed=lambda: 7, run_seed=lambda: opts["seed"])
    batch, lengths = parse_distribution("1-4", "batch_size", minimum=1), parse_distribution(8, "input_tokens")

    def pool():
        return shared_workload("embed", "m", batch, lengths, "float", None, body_context(user)).pool

    first = pool()
    assert pool() is first  # every user of the test shares it
    opts["seed"] = 2  # the web UI's next test draws a fresh seed: new batches, as --seed 2 would give
    second = pool()
    assert second is not first and second.batches != first.batches and len(shared._built) == 1
    opts["seed"] = 1
    assert pool().batches == first.batches  # --seed 1 repeats the first test
