"""SSE decoding and chunk classification on recorded streams from each server family."""

from __future__ import annotations

import json

import pytest

from llmload.wire.chunks import DONE, IGNORED, PLAIN, classify, classify_event, interpret
from llmload.wire.protocol import chat_body, completions_body, encode_body, error_message
from llmload.wire.sse import SSEDecoder
from tests.support import recorded_streams as rs


def events(body: bytes, step: int | None = None) -> list:
    d = SSEDecoder()
    out = []
    if step is None:
        out += d.feed(body)
    else:
        for i in range(0, len(body), step):
            out += d.feed(body[i:i + step])
    return out + d.flush()


def chunks(body: bytes, want_text: bool = False) -> list:
    return [classify_event(e, want_text) for e in events(body)]


@pytest.mark.parametrize("step", [None, 1, 7, 64])
def test_decoder_gives_the_same_events_however_the_bytes_are_split(step):
    assert events(rs.VLLM_CHAT, step) == events(rs.VLLM_CHAT)
    assert len(events(rs.VLLM_CHAT)) == 6
    assert events(rs.TGI_CHAT, step) == events(rs.TGI_CHAT)


def test_decoder_handles_multiline_data_comments_event_names_and_crlf():
    body = (b": keep-alive comment\r\n\r\n"
            b"event: message\ndata: {\"a\":\ndata: 1}\n\n"
            b"id: 7\nretry: 100\nevent: ping\ndata: {}\n\n"
            b"event: error\r\ndata: {\"error\":{\"message\":\"boom\"}}\r\n\r\n"
            b"data:no-space\n\n")
    ev = events(body)
    assert ev[0] == b'{"a":\n1}'
    assert json.loads(ev[0]) == {"a": 1}
    assert ev[1] == ("ping", b"{}")
    assert ev[2] == ("error", b'{"error":{"message":"boom"}}')
    assert ev[3] == b"no-space"
    assert classify_event(ev[1]) is IGNORED
    assert classify_event(ev[2]).error == "boom"


def test_flush_returns_an_event_left_without_its_blank_line():
    d = SSEDecoder()
    assert d.feed(b"data: [DONE]") == []
    assert d.pending
    assert d.flush() == [b"[DONE]"]


def test_vllm_role_only_chunk_is_not_output_and_content_is():
    cs = chunks(rs.VLLM_CHAT)
    assert [c.output for c in cs] == [False, True, True, True, False, False]
    assert cs[1] is PLAIN and cs[2] is PLAIN  # decided from bytes, escaped quotes included
    assert cs[3].finish_reason == "stop"
    assert cs[4].usage["completion_tokens"] == 4
    assert cs[5] is DONE


def test_want_text_parses_every_content_chunk():
    cs = chunks(rs.VLLM_CHAT, want_text=True)
    assert "".join(c.text for c in cs) == 'Hello "world"!'


def test_reasoning_counts_as_output_but_not_as_visible():
    cs = chunks(rs.VLLM_REASONING)
    assert [(c.output, c.visible) for c in cs[:4]] == [(False, False), (True, False), (True, False), (True, True)]


def test_continuous_usage_stats_chunks_are_parsed_for_their_usage():
    cs = chunks(rs.VLLM_CONTINUOUS_USAGE)
    assert cs[0] is not PLAIN and cs[0].output and cs[0].usage["completion_tokens"] == 2
    assert cs[1].usage["completion_tokens"] == 4 and cs[1].finish_reason == "length"


def test_sglang_tgi_llamacpp_openai_and_completions_shapes():
    sg = chunks(rs.SGLANG_CHAT)
    assert [c.output for c in sg] == [False, True, True, False, False]
    tgi = chunks(rs.TGI_CHAT)
    assert [c.output for c in tgi] == [True, True, False] and tgi[1].finish_reason == "eos_token"
    assert tgi[2] is DONE
    ll = chunks(rs.LLAMACPP_CHAT)
    assert [c.output for c in ll] == [False, True, False, False]
    assert ll[2].usage["completion_tokens"] == 1 and ll[2].finish_reason == "stop"
    oa = chunks(rs.OPENAI_TOOL_CALLS)
    assert [(c.output, c.visible) for c in oa[:3]] == [(True, False), (True, False), (False, False)]
    assert oa[3].usage["prompt_tokens_details"]["cached_tokens"] == 16
    co = chunks(rs.VLLM_COMPLETIONS)
    assert co[0] is PLAIN and co[1].finish_reason == "length" and co[1].visible


def test_error_object_and_malformed_json():
    cs = chunks(rs.VLLM_STREAM_ERROR)
    assert cs[1].error == "engine died"
    bad = classify(b'{"choices":[{"delta":{"content":"x"')
    assert bad.bad and "invalid JSON" in bad.bad
    assert classify(b"[1,2]").bad
    assert interpret({"object": "error", "message": "ctx too long"}).error == "ctx too long"


def test_request_bodies():
    b = chat_body("m", [{"role": "user", "content": "hi"}], 16, sampling={"temperature": 0.0},
                  extra={"ignore_eos": True, "min_tokens": 16})
    assert b == {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True, "max_tokens": 16,
                 "stream_options": {"include_usage": True}, "temperature": 0.0, "ignore_eos": True, "min_tokens": 16}
    c = completions_body("m", "once", None, stream=False)
    assert c == {"model": "m", "prompt": "once", "stream": False}
    assert json.loads(encode_body(b)) == b


def test_error_message_extraction():
    assert error_message(b'{"error":{"message":"slow down","code":429}}') == "slow down"
    assert error_message(b'{"object":"error","message":"too long","code":400}') == "too long"
    assert error_message(b"<html>bad gateway</html>") == "<html>bad gateway</html>"


HOSTILE_COUNTS = [("2**64", str(2**64), "got 18446744073709551616"), ("10**400", "1" + "0" * 400, "401-digit"),
                  ("negative", "-1", "got -1"), ("fraction", "1.5", "got 1.5"), ("NaN", "NaN", "got nan"),
                  ("Infinity", "Infinity", "got inf"), ("overflowing float", "1e400", "got inf"),
                  ("string", '"12"', "got '12'"), ("bool", "true", "got True"), ("2**32", str(2**32), "got 4294967296")]


@pytest.mark.parametrize("name,value,shown", HOSTILE_COUNTS, ids=[c[0] for c in HOSTILE_COUNTS])
def test_a_count_no_table_can_hold_makes_the_event_a_protocol_error_naming_the_field(name, value, shown):
    chat = classify(b'{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":%s}}' % value.encode())
    assert chat.bad.startswith("usage.completion_tokens: expected a whole number 0 <= n < 2**32") and shown in chat.bad
    assert chat.usage is None and len(chat.bad) < 150
    cached = classify(b'{"choices":[],"usage":{"prompt_tokens_details":{"cached_tokens":%s}}}' % value.encode())
    assert cached.bad.startswith("usage.prompt_tokens_details.cached_tokens:")
    done = classify_event(("response.completed", b'{"type":"response.completed","response":{"status":"completed",'
                           b'"usage":{"input_tokens":%s,"output_tokens":2}}}' % value.encode()))
    assert not done.done and done.bad.startswith("usage.input_tokens: expected a whole number")


def test_counts_in_range_are_taken_and_reduced_to_the_chat_shape():
    c = classify(b'{"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":12.0,"total_tokens":"n/a",'
                 b'"prompt_tokens_details":{"cached_tokens":null}}}')
    assert c.bad is None and c.usage == {"prompt_tokens": 5, "completion_tokens": 12}
    big = 2**32 - 1
    c = classify(b'{"choices":[],"usage":{"completion_tokens":%d,"prompt_tokens_details":{"cached_tokens":0}}}' % big)
    assert c.usage == {"completion_tokens": big, "prompt_tokens_details": {"cached_tokens": 0}}
    done = classify_event(("response.completed", b'{"type":"response.completed","response":{"usage":{'
                           b'"input_tokens":3,"output_tokens":2,"input_tokens_details":{"cached_tokens":1}}}}'))
    assert done.done and done.usage == {"prompt_tokens": 3, "completion_tokens": 2,
                                        "prompt_tokens_details": {"cached_tokens": 1}}
