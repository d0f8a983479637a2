"""Scenario files that mix endpoints: ``endpoint: embeddings|rerank|score`` with their keys, the RAG
``pipeline:`` and its tasks (the query embedded, passages ranked, the best ones in the chat prompt),
the errors of a key that does not go with a workload, and the mock's /metrics for pooling requests."""

from __future__ import annotations

import json
import textwrap
from types import SimpleNamespace

import pytest

from llmload.mock.engine.metrics_state import EngineStats, buckets_1_2_5
from llmload.plugin.users.whole_body import body_meta
from llmload.wire.rerank import ranked_indices
from llmload.workload.file.scenario import ScenarioError, parse_scenario
from llmload.workload.tasks.rag_pipeline import RagPipeline
from llmload.workload.text import TextSource

MIXED = """
seed: 3
workloads:
  chat: {weight: 2, input_tokens: 64, output_tokens: 16, slo: {ttft_p95_ms: 500}}
  embed:
    endpoint: embeddings
    weight: 1
    batch_size: 2-16
    input_tokens: 32
    encoding_format: base64
    dimensions: 256
    slo: {e2e_p95_ms: 50}
  rank: {endpoint: rerank, documents: 8, query_tokens: 12, document_tokens: 40-60, top_n: 3}
  score: {endpoint: score, documents: 4}
  rag:
    pipeline: [embed, rerank, chat]
    documents: 10
    document_tokens: 20
    query_tokens: 6
    top_n: 2
    output_tokens: 8
    system_prompt: Be brief.
    slo: {task_p95_s: 2}
"""


def scenario(text: str):
    return parse_scenario(textwrap.dedent(text), "s.yaml")


def test_each_endpoint_is_a_workload_with_its_own_keys_and_slos():
    spec = scenario(MIXED)
    w = {x.name: x for x in spec.workloads}
    assert [w[n].endpoint for n in ("chat", "embed", "rank", "score", "rag")] == \
        ["chat", "embeddings", "rerank", "score", "chat"]
    assert w["chat"].body is None and w["chat"].pipeline is None
    e = w["embed"].body
    assert (e.batch_size.params, e.input_tokens.mean, e.encoding_format, e.dimensions) == ((2, 16), 32, "base64", 256)
    assert [(s.metric, s.limit, s.scenario) for s in w["embed"].slos] == [("e2e_p95_ms", 50, "embed")]
    r = w["rank"].body
    assert (r.documents.mean, r.query_tokens.mean, r.document_tokens.params, r.top_n) == (8, 12, (40, 60), 3)
    assert w["score"].body.top_n is None and w["score"].body.document_tokens.mean == 128  # the default
    assert w["rag"].pipeline.steps == ("embed", "rerank", "chat") and w["rag"].body.top_n == 2
    assert [s.metric for s in w["rag"].slos] == ["task_p95_s"]
    defaults = scenario("workloads:\n  e: {endpoint: embeddings}\n").workloads[0].body
    assert (defaults.batch_size.mean, defaults.input_tokens.mean, defaults.encoding_format) == (8, 128, "float")


@pytest.mark.parametrize(("text", "error"), [
    ("workloads:\n  e: {endpoint: embeddings, output_tokens: 5}\n",
     "s.yaml:2: workloads.e.output_tokens: does not go with endpoint embeddings: its keys are batch_size, dimensions"),
    ("workloads:\n  r: {endpoint: score, top_n: 2}\n", "workloads.r.top_n: does not go with endpoint score"),
    ("workloads:\n  c: {batch_size: 4}\n", "workloads.c.batch_size: goes only with endpoint embeddings, rerank, "
     "score or tokenize, or a pipeline; this workload streams chat"),
    ("workloads:\n  e: {endpoint: embeddings, batch_sise: 4}\n", "did you mean batch_size?"),
    ("workloads:\n  e: {endpoint: embeddings, encoding_format: int8}\n", "encoding_format: expected float or base64"),
    ("workloads:\n  e: {endpoint: embedding}\n", "workloads.e.endpoint: expected chat or completions or responses or "
     "messages or embeddings or rerank or score"),
    ("workloads:\n  p: {pipeline: [rerank, embed, chat]}\n", "workloads.p.pipeline: expected steps in the order "
     "embed, rerank, chat"),
    ("workloads:\n  p: {pipeline: [embed, rerank]}\n", "ending with chat"),
    ("workloads:\n  p: {pipeline: {steps: [rerank, chat], rerank_api: cohere}}\n",
     "workloads.p.pipeline.rerank_api: expected rerank or score"),
    ("workloads:\n  p: {pipeline: [embed, chat], input_tokens: 5}\n",
     "workloads.p.input_tokens: does not go with a pipeline"),
    ("workloads:\n  p: {endpoint: messages, pipeline: [embed, chat]}\n",
     "workloads.p.pipeline: a pipeline ends with a chat call: endpoint chat, not messages"),
])
def test_a_key_that_does_not_go_with_the_workload_is_one_error_naming_it(text, error):
    with pytest.raises(ScenarioError) as e:
        scenario(text)
    assert error in str(e.value) and "\n" not in str(e.value), str(e.value)


@pytest.mark.parametrize(("value", "error"), [
    ("{dist: empirical, values: [1, 1000000], weights: [99, 1]}", "1e+06 is too large: expected at most 100,000"),
    ("{dist: lognormal, median: 4, sigma: 2}", "a lognormal draw has no upper bound: give max: (at most 100,000"),
    ("{dist: normal, mean: 10, std: 5}", "a normal draw has no upper bound"),
    ("{dist: lognormal, median: 4, sigma: 2, max: 200000}", "200000 is too large"),
    ("{dist: histogram, bins: [[1, 10, 99], [10, 100001, 1]]}", "100001 is too large"),
    ("100-100001", "100001 is too large"),
])
def test_the_largest_draw_of_texts_per_request_is_checked_not_the_mean(value, error):
    for key, head in (("batch_size", "endpoint: embeddings"), ("documents", "endpoint: rerank"),
                      ("documents", "endpoint: score"), ("documents", "pipeline: [rerank, chat]")):
        with pytest.raises(ScenarioError) as e:
            scenario(f"workloads:\n  w:\n    {head}\n    {key}: {value}\n")
        assert f"s.yaml:4: workloads.w.{key}: {error}" in str(e.value) and "\n" not in str(e.value), str(e.value)


@pytest.mark.parametrize("value", ["{dist: lognormal, median: 4, sigma: 2, max: 100000}", "{dist: normal, mean: 9, "
                                   "std: 0}", "{dist: empirical, values: [1, 1000000], weights: [1, 0]}", "100000"])
def test_texts_per_request_whose_largest_draw_fits_load(value):
    spec = scenario(f"workloads:\n  e:\n    endpoint: embeddings\n    batch_size: {value}\n").workloads[0]
    assert spec.body.batch_size.top <= 100_000


def test_defaults_apply_where_they_fit():
    spec = scenario("defaults: {output_tokens: 9, model: m}\nworkloads:\n  e: {endpoint: embeddings}\n  c: {}\n")
    e, c = spec.workloads
    assert e.model == c.model == "m" and c.output_tokens.mean == 9 and e.body is not None


def test_models_and_priority_of_the_defaults_stay_with_the_workloads_they_fit():
    spec = scenario("defaults: {models: {a: 1, b: 1}, priority: {class: fast, value: 0}}\nworkloads:\n"
                    "  e: {endpoint: embeddings}\n  r: {endpoint: rerank}\n  s: {endpoint: score}\n"
                    "  p: {pipeline: [rerank, chat]}\n  c: {}\n")
    w = {x.name: x for x in spec.workloads}
    for name in "ers":  # whole-body: one model, no priority class (their rows would carry none)
        assert w[name].models is None and w[name].priority is None and "priority" not in w[name].extra
    assert w["p"].models is None and w["p"].priority.name == "fast" and w["p"].extra["priority"] == 0
    assert w["c"].models.names == ("a", "b") and w["c"].priority.name == "fast"


@pytest.mark.parametrize(("text", "error"), [
    ("workloads:\n  e: {endpoint: embeddings, models: {a: 1}}\n", "s.yaml:2: workloads.e.models: does not go with "
     "endpoint embeddings: a mix of models goes with streaming workloads; this one sends one model, model:; its keys"),
    ("workloads:\n  r: {endpoint: rerank, priority: batch}\n", "s.yaml:2: workloads.r.priority: does not go with "
     "endpoint rerank: whole-body requests carry no priority class"),
    ("workloads:\n  s: {endpoint: score, priority: {class: b, value: 3}}\n", "workloads.s.priority: does not go"),
    ("workloads:\n  p: {pipeline: [embed, chat], models: {a: 1}}\n", "workloads.p.models: does not go with a "
     "pipeline: a mix of models goes with streaming workloads; this one sends one model, model: (and embed_model"),
])
def test_models_and_priority_on_a_whole_body_workload_are_one_error(text, error):
    with pytest.raises(ScenarioError) as e:
        scenario(text)
    assert error in str(e.value) and "\n" not in str(e.value), str(e.value)


def test_a_whole_body_row_carries_its_users_priority_class():
    plugin = SimpleNamespace(next_request_id=lambda: 7, worker_index=0)
    user = SimpleNamespace(environment=SimpleNamespace(runner=None), plugin=plugin, priority_class="answer")
    assert body_meta(user, "rag", 8, 1, "t1", 1, "embed").priority == "answer"


def test_a_pipeline_task_embeds_the_query_ranks_its_passages_and_prompts_with_the_best():
    spec = {w.name: w for w in scenario(MIXED).workloads}["rag"]
    rag = RagPipeline(spec, seed=4, model="llm", text=TextSource(1), embed_model="emb")
    task = rag.start_task()
    embed, rank = json.loads(task.embed_body), json.loads(task.rank_body)
    assert embed == {"model": "emb", "input": [task.query], "encoding_format": "float"}
    assert rank["query"] == task.query and rank["documents"] == list(task.documents) and rank["top_n"] == 2
    assert rank["model"] == "llm" and len(task.documents) == 10 and task.document_tokens == (20,) * 10
    assert len(task.query.split()) == task.query_tokens == 6
    chat = rag.chat_request(task, ranked=[7, 3, 1])
    prompt = chat.messages[-1]["content"]
    assert task.documents[7] in prompt and task.documents[3] in prompt and task.documents[1] not in prompt
    assert prompt.index(task.documents[7]) < prompt.index(task.documents[3]) and prompt.endswith(task.query)
    assert chat.messages[0] == {"role": "system", "content": "Be brief."}
    assert chat.input_tokens == len(prompt.split()) + 2 and chat.max_tokens == 8
    assert (chat.session_id, chat.turn, chat.step_kind) == (task.task_id, 3, "chat")
    assert rag.start_task().task_id != task.task_id
    unranked = rag.chat_request(task, ranked=None).messages[-1]["content"]  # [embed, chat]: the first top_n
    assert task.documents[0] in unranked and task.documents[1] in unranked and task.documents[2] not in unranked


def test_ranked_indices_are_best_first():
    body = json.dumps({"results": [{"index": 2, "relevance_score": 0.1}, {"index": 0, "relevance_score": 0.9},
                                   {"index": 1, "relevance_score": 0.5}]}).encode()
    assert ranked_indices(body) == [0, 1, 2]
    score = json.dumps({"data": [{"index": 0, "score": 0.2}, {"index": 1, "score": 0.7}]}).encode()
    assert ranked_indices(score, "score") == [1, 0]


def test_pooling_requests_count_where_vllm_counts_them():
    from llmload.mock.telemetry.prometheus import render_metrics

    class Engine:  # what render_metrics reads of an engine
        num_running = num_waiting = 0
        kv_usage = 0.0
        prefix_cache = type("Cache", (), {"queried_tokens": 0, "hit_tokens": 0})()

    engine = Engine()
    engine.stats = s = EngineStats("vllm", max_model_len=8192)
    s.pooled(120, queue_s=0.002, e2e_s=0.011)
    s.pooled(80, queue_s=0.0, e2e_s=0.004)
    assert (s.prompt_tokens, s.requests_finished, s.pooling_requests) == (200, 2, 2)
    assert s.finished_reasons == {"stop": 2, "length": 0, "abort": 0}
    assert (s.e2e.count, s.ttft.count, s.queue.count, s.request_prompt_tokens.sum) == (2, 2, 2, 200)
    text = render_metrics(engine, "bge", {"completed": 2})
    for line in ('vllm:request_success_total{engine="0",model_name="bge",finished_reason="stop"} 2',
                 'vllm:prompt_tokens_total{engine="0",model_name="bge"} 200',
                 'vllm:e2e_request_latency_seconds_count{engine="0",model_name="bge"} 2',
                 'vllm:request_prompt_tokens_sum{engine="0",model_name="bge"} 200'):
        assert line in text, line
    assert buckets_1_2_5(100) == (1.0, 2.0, 5.0, 10.0, 20.0, 50.0, 100.0)
