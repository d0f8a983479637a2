"""Rerank and score, pure: what an answer must be to count, and the workload's requests."""

from __future__ import annotations

import json

import pytest

from llmload.wire.rerank import check_rerank, check_score
from llmload.workload.distributions import parse_distribution
from llmload.workload.endpoints.rerank import RerankWorkload


def results(indices: list, scores: list | None = None, usage: dict | None = None) -> bytes:
    scores = scores or [0.5] * len(indices)
    return json.dumps({"model": "m", "usage": usage or {"total_tokens": 30},
                       "results": [{"index": i, "relevance_score": s} for i, s in zip(indices, scores,
                                                                                       strict=True)]}).encode()


def test_a_whole_answer_passes_with_its_tokens():
    assert check_rerank(results([2, 0, 1]), 3).error is None
    assert check_rerank(results([2, 0, 1]), 3).prompt_tokens == 30  # total_tokens when there is no prompt_tokens
    assert check_rerank(results([1]), 3, top_n=1).error is None
    assert check_rerank(results([1, 0]), 2, top_n=5).error is None  # top_n over the documents: all of them
    score = json.dumps({"data": [{"index": 0, "score": 0.1}, {"index": 1, "score": 1}],
                        "usage": {"prompt_tokens": 12}}).encode()
    assert (check_score(score, 2).error, check_score(score, 2).prompt_tokens) == (None, 12)


@pytest.mark.parametrize(("body", "docs", "top_n", "error"), [
    (results([0, 1]), 3, None, "3 results expected (3 documents), got 2"),
    (results([0, 0]), 2, None, "results[1].index: 0 is not a new index in 0..1"),
    (results([0, 3]), 2, 2, "results[1].index: 3 is not a new index"),
    (results([0], ["high"]), 1, None, "results[0].relevance_score: expected a number, got \"high\""),
    (b'{"results": [', 1, None, "the body is not JSON"),
    (b'{"data": []}', 1, None, "expected a JSON object with a results list"),
    (results([0], usage={"prompt_tokens": 1.5}), 1, None, "usage.prompt_tokens"),
])
def test_a_wrong_answer_says_what_is_wrong(body, docs, top_n, error):
    check = check_rerank(body, docs, top_n)
    assert check.error is not None and error in check.error, check.error


def test_the_workload_draws_a_query_and_its_passages_reproducibly():
    def make(api: str) -> RerankWorkload:
        return RerankWorkload(api, "m", api, parse_distribution("2-6", "documents", minimum=1),
                              parse_distribution(4, "q", minimum=1), parse_distribution(10, "d", minimum=1), 5, top_n=3)

    a, b = make("rerank"), make("rerank")
    reqs = [a.next_request() for _ in range(20)]
    assert [r.body for r in reqs] == [b.next_request().body for _ in range(20)]
    assert {r.inputs for r in reqs} <= set(range(2, 7)) and all(r.tokens == r.inputs * 14 for r in reqs)
    body = json.loads(reqs[0].body)
    assert set(body) == {"model", "query", "documents", "top_n"} and body["top_n"] == 3
    score = json.loads(make("score").next_request().body)
    assert set(score) == {"model", "text_1", "text_2"}
