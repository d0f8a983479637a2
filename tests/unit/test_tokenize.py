"""The tokenizer-cost endpoint (``endpoint: tokenize``, POST /tokenize): the bodies in vLLM's and
llama.cpp's shapes, the answer's check, the workload, the scenario keys, and the mock's answers."""

from __future__ import annotations

import json

import pytest

from llmload.mock.api.tokenize_api import parse_tokenize_body, tokenize_answer
from llmload.mock.front.faults import parse_fault
from llmload.wire.endpoints import endpoint, part
from llmload.wire.tokenize import TokenizeCheck, check_tokenize, tokenize_body
from llmload.workload.distributions import parse_distribution
from llmload.workload.endpoints.tokenize import TokenizeWorkload
from llmload.workload.file.scenario import ScenarioError, parse_scenario


def test_the_body_is_vllms_or_llamacpps():
    assert tokenize_body("m", "a b", "vllm") == {"model": "m", "prompt": "a b"}
    assert tokenize_body("m", "a b", "llamacpp") == {"model": "m", "content": "a b"}


@pytest.mark.parametrize("answer, tokens", [
    ({"count": 3, "max_model_len": 4096, "tokens": [1, 2, 3], "token_strs": None}, 3),  # vLLM
    ({"tokens": [5, 0]}, 2),  # llama.cpp
    ({"tokens": [{"id": 5, "piece": "a"}, {"id": 6, "piece": [226, 150]}]}, 2),  # llama.cpp's with_pieces
])
def test_an_answer_of_either_server_counts_its_tokens(answer, tokens):
    assert check_tokenize(json.dumps(answer).encode()) == TokenizeCheck(None, tokens)


@pytest.mark.parametrize("body, error", [
    (b"not json", "the body is not JSON"),
    (b'{"count": 2}', "expected a JSON object with a tokens list"),
    (b'{"tokens": [1, -2]}', "tokens[1]: -2 is not a token id"),
    (b'{"tokens": [1, true]}', "tokens[1]: true is not a token id"),
    (b'{"tokens": [{"piece": "a"}]}', 'tokens[0]: {"piece": "a"} is not a token id'),
    (b'{"tokens": []}', "no tokens"),
    (b'{"count": 3, "tokens": [1, 2]}', "count 3 but 2 tokens"),
])
def test_a_wrong_answer_says_what_is_wrong(body, error):
    assert check_tokenize(body).error.startswith(error)


def test_the_workload_sends_unique_texts_of_the_drawn_lengths_and_is_seeded():
    def make(seed: int) -> TokenizeWorkload:
        return TokenizeWorkload("tok", "m", parse_distribution("5-50", "input_tokens"), seed, "llamacpp")

    a, b = make(3), make(3)
    reqs = [a.next_request() for _ in range(30)]
    assert [r.body for r in reqs] == [b.next_request().body for _ in range(30)]
    texts = [json.loads(r.body)["content"] for r in reqs]
    assert len(set(texts)) == 30 and all(r.inputs == 1 and 5 <= r.tokens <= 50 for r in reqs)
    assert all(len(t.split()) == r.tokens for t, r in zip(texts, reqs, strict=True))
    assert json.loads(make(3).next_request().body)["model"] == "m"


def test_a_scenario_workload_takes_its_keys_and_refuses_others():
    spec = parse_scenario("workloads:\n  t: {endpoint: tokenize, input_tokens: 10-20, tokenize_format: llamacpp}\n",
                          "s.yaml")
    body = spec.workloads[0].body
    assert body.input_tokens.params == (10, 20) and body.option("tokenize_format") == "llamacpp"
    assert parse_scenario("workloads:\n  t: {endpoint: tokenize}\n", "s.yaml").workloads[0].body.option(
        "tokenize_format") == "vllm"
    with pytest.raises(ScenarioError, match=r"workloads.t.tokenize_format: expected vllm or llamacpp, got 'sglang'"):
        parse_scenario("workloads:\n  t: {endpoint: tokenize, tokenize_format: sglang}\n", "s.yaml")
    with pytest.raises(ScenarioError, match=r"workloads.t.output_tokens: does not go with endpoint tokenize"):
        parse_scenario("workloads:\n  t: {endpoint: tokenize, output_tokens: 5}\n", "s.yaml")
    with pytest.raises(ScenarioError, match=r"workloads.c.tokenize_format: goes only with endpoint embeddings"):
        parse_scenario("workloads:\n  c: {tokenize_format: vllm}\n", "s.yaml")


@pytest.mark.parametrize("fmt", ["vllm", "llamacpp"])
def test_the_mock_answers_in_the_requests_shape_and_the_check_passes_it(fmt):
    body = json.dumps(tokenize_body("m", "one two three four", fmt)).encode()
    req = parse_tokenize_body(body, "mock")
    answer, outcome = tokenize_answer(req, "", 4096)
    assert outcome == "completed" and check_tokenize(answer) == TokenizeCheck(None, 4)
    obj = json.loads(answer)
    assert set(obj) == ({"count", "max_model_len", "tokens", "token_strs"} if fmt == "vllm" else {"tokens"})
    bad, outcome = tokenize_answer(req, "wrong_count", 4096)
    assert outcome == "fault:wrong_count" and check_tokenize(bad).error is not None


def test_the_mock_reads_vllms_chat_form_and_llamacpps_pieces_and_refuses_a_bodyless_request():
    req = parse_tokenize_body(b'{"messages": [{"role": "user", "content": "a b c"}]}', "mock")
    assert req.tokens == 3 and not req.llamacpp
    req = parse_tokenize_body(b'{"content": "a b", "with_pieces": true}', "mock")
    assert json.loads(tokenize_answer(req, "", 1)[0])["tokens"][1]["piece"] == "b"
    with pytest.raises(ValueError, match="expected prompt or messages"):
        parse_tokenize_body(b'{"model": "m"}', "mock")
    assert parse_fault("wrong_count").kind == "wrong_count"


def test_the_registry_line_names_every_part():
    ep = endpoint("tokenize")
    assert (ep.path, ep.answer, ep.operation) == ("/tokenize", "body", "tokenize")
    assert part(ep.check) is check_tokenize and callable(part(ep.workload)) and part(ep.mock).answer is tokenize_answer
