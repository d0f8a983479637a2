"""The mock's structured replies: JSON of an exact token count, tool calls streamed in vLLM's shape,
image prompts priced as Qwen2-VL prices them, and the default profile."""

from __future__ import annotations

import json
import random

import pytest

from llmload.mock.api.structured import json_pieces, plan_reply
from llmload.mock.engine.batching_engine import BatchingEngine
from llmload.mock.options import MockConfig
from llmload.mock.profiles import DEFAULT_PROFILE, PROFILES
from llmload.workload.images import image_part
from llmload.workload.tasks.agent import synthetic_tools
from tests.support.mock_client import post, sse_events

SCHEMAS = [
    None,
    {"type": "object", "properties": {"title": {"type": "string"}}},
    {"type": "object", "properties": {"a": {"type": "string"}, "n": {"type": "integer"}, "ok": {"type": "boolean"},
                                      "x": {"type": ["null", "number"]}, "b": {"type": "string"},
                                      "e": {"enum": ["red", "blue"]}, "list": {"type": "array"}}},
    {"type": "object", "properties": {"n": {"type": "integer"}, "m": {"type": "number"}}},  # no room for words
]


@pytest.mark.parametrize("schema", SCHEMAS)
def test_json_pieces_are_valid_json_of_exactly_n_tokens(schema):
    for n in range(1, 80):
        pieces = json_pieces(n, schema, seed=n)
        assert len(pieces) == n and all(pieces), (n, pieces)
        obj = json.loads("".join(pieces))
        assert isinstance(obj, dict)
        props = (schema or {}).get("properties", {})
        if props and any(p.get("type") == "string" for p in props.values()) and n >= 2 * len(props) + 1:
            assert list(obj) == list(props)  # the schema's properties, in order
            assert obj.get("e", "red") == "red" and isinstance(obj.get("n", 1), int)
    assert json_pieces(20, SCHEMAS[2], seed=1) == json_pieces(20, SCHEMAS[2], seed=1)


def test_plan_reply():
    tools = list(synthetic_tools(3))
    rng = random.Random(1)
    assert plan_reply(tools, "required", None, rng, 0.0).kind == "tool"
    named = plan_reply(tools, {"type": "function", "function": {"name": "run_sql"}}, None, rng, 0.0)
    assert named.tool_name == "run_sql" and named.call_id.startswith("chatcmpl-tool-")
    assert named.schema == tools[2]["function"]["parameters"]
    assert plan_reply(tools, "none", None, rng, 1.0).kind == "text"
    assert plan_reply([], "required", None, rng, 1.0).kind == "text"
    calls = sum(plan_reply(tools, "auto", None, rng, 0.3).kind == "tool" for _ in range(4000))
    assert 1000 < calls < 1400
    assert plan_reply(tools, None, None, rng, 1.0).kind == "tool"  # no tool_choice: auto
    fmt = {"type": "json_schema", "json_schema": {"name": "r", "schema": SCHEMAS[1]}}
    assert plan_reply([], None, fmt, rng, 1.0).schema == SCHEMAS[1]
    assert plan_reply([], None, {"type": "json_object"}, rng, 1.0).kind == "json"
    assert plan_reply([], None, {"type": "text"}, rng, 1.0).kind == "text"
    tool = plan_reply(tools, "required", None, rng, 0.0)
    assert tool.pieces(1, 0) == ["{}"] and tool.pieces(6, 0)[0] == "" and json.loads("".join(tool.pieces(6, 0)))


def body(**kw) -> dict:
    b = {"model": "m", "messages": [{"role": "user", "content": "look it up"}], "max_tokens": 8, "stream": True,
         "stream_options": {"include_usage": True}, "ignore_eos": True}
    b.update(kw)
    return b


def test_tool_call_stream_is_vllms(fixed_mock):
    tools = list(synthetic_tools(2))
    status, _, data = post(fixed_mock, "/v1/chat/completions", body(tools=tools, tool_choice="required"))
    assert status == 200
    objs = [json.loads(e[6:]) for e in sse_events(data)[:-1]]
    deltas = [o["choices"][0]["delta"] for o in objs if o["choices"]]
    assert deltas.pop(0) == {"role": "assistant", "content": ""}  # the role goes first, as vLLM sends it
    head = deltas[0]["tool_calls"][0]
    assert set(head) == {"id", "type", "index", "function"} and head["id"].startswith("chatcmpl-tool-")
    assert head["type"] == "function" and head["index"] == 0 and set(head["function"]) == {"name"}
    assert head["function"]["name"] in {"search_docs", "read_file"}
    assert all(d["tool_calls"] == [{"index": 0, "function": {"arguments": d["tool_calls"][0]["function"]["arguments"]}}]
               for d in deltas[1:])
    arguments = "".join(d["tool_calls"][0]["function"]["arguments"] for d in deltas[1:])
    assert set(json.loads(arguments)) == {"query", "limit"}
    assert [o["choices"][0]["finish_reason"] for o in objs if o["choices"]][-1] == "tool_calls"
    assert len(deltas) == 8 and objs[-1]["usage"]["completion_tokens"] == 8
    # not streamed: the message carries the call
    status, _, data = post(fixed_mock, "/v1/chat/completions", body(tools=tools, tool_choice="required", stream=False))
    choice = json.loads(data)["choices"][0]
    assert choice["finish_reason"] == "tool_calls" and choice["message"]["content"] is None
    call = choice["message"]["tool_calls"][0]
    assert call["id"].startswith("chatcmpl-tool-") and set(json.loads(call["function"]["arguments"])) == {"query",
                                                                                                          "limit"}
    # tool_choice none: words as usual; response_format: JSON content of max_tokens tokens
    _, _, data = post(fixed_mock, "/v1/chat/completions", body(tools=tools, tool_choice="none"))
    objs = [json.loads(e[6:]) for e in sse_events(data)[:-1]]
    assert all(set(o["choices"][0]["delta"]) == {"content"} for o in objs[1:] if o["choices"])
    fmt = {"type": "json_schema", "json_schema": {"name": "r", "schema": SCHEMAS[2]}}
    _, _, data = post(fixed_mock, "/v1/chat/completions", body(response_format=fmt, max_tokens=30))
    objs = [json.loads(e[6:]) for e in sse_events(data)[:-1]]
    text = "".join(o["choices"][0]["delta"].get("content", "") for o in objs if o["choices"])
    assert list(json.loads(text)) == list(SCHEMAS[2]["properties"]) and objs[-1]["usage"]["completion_tokens"] == 30


def test_prompt_tokens_count_tools_tool_calls_and_images(fixed_mock):
    tools = list(synthetic_tools(2))
    picture = image_part(448, 224, "png", 3)  # 16 x 8 patches of 28 pixels
    messages = [
        {"role": "user", "content": [{"type": "text", "text": "what is in it"}, picture]},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c", "type": "function", "function": {"name": "read_file", "arguments": '{"query": "a b"}'}}]},
        {"role": "tool", "tool_call_id": "c", "content": "five words of tool output"},
    ]
    _, _, data = post(fixed_mock, "/v1/chat/completions", body(messages=messages, tools=tools, tool_choice="none",
                                                                stream=False), {"X-Request-Id": "img-1"})
    tool_words = sum(len(json.dumps(t).split()) for t in tools)
    assert json.loads(data)["usage"]["prompt_tokens"] == tool_words + 4 + 16 * 8 + 1 + 3 + 5
    entry = fixed_mock.log_by_id(expect=1)["img-1"]
    assert entry["image_tokens"] == 128 and entry["reply"] == "text"
    bad = [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "https://x/cat.png"}}]}]
    status, _, data = post(fixed_mock, "/v1/chat/completions", body(messages=bad))
    assert status == 400 and "messages[0].content[0].image_url: image url: expected an inline data: URL" in \
        json.loads(data)["error"]["message"]


def test_the_same_picture_is_a_cacheable_prefix(mock_factory):
    mock = mock_factory("--output-mean-tokens", "4")  # the default profile caches prefixes
    picture = image_part(448, 448, "png", 9)
    cached = []
    for i in range(2):
        messages = [{"role": "user", "content": [picture, {"type": "text", "text": f"question {i}"}]}]
        _, _, data = post(mock, "/v1/chat/completions", body(messages=messages, stream=False))
        cached.append(json.loads(data)["usage"]["prompt_tokens_details"]["cached_tokens"])
    assert cached == [0, 256]  # 16 x 16 image tokens, whole 16-token blocks


def test_default_profile_is_vllm_v1():
    assert DEFAULT_PROFILE == "vllm-v1"
    params = PROFILES["vllm-v1"].engine
    assert params.prefix_caching and params.chunked_prefill and params.max_num_batched_tokens == 2048
    assert params.max_num_seqs == 256
    a800 = PROFILES["qwen2.5-3b-a800"].engine
    assert not a800.prefix_caching and not a800.chunked_prefill  # the calibrated table's settings
    assert (a800.step_base_ms, a800.step_per_seq_ms) == (params.step_base_ms, params.step_per_seq_ms)
    assert BatchingEngine(params).prefix_cache.capacity > 0
    assert MockConfig(PROFILES["vllm-v1"], params).tool_call_rate == 0.5
