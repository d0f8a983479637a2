"""The Anthropic Messages API (/v1/messages): what each event means, the usage from message_start
plus message_delta, the end a stream must have (message_stop), the request's body and headers, and
every Messages fixture fed through the fast transport's response parser split at every byte offset."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from llmload.metrics import record as R
from llmload.transport.connection import ClientOptions, for_messages_api
from llmload.transport.stream import Deadlines, ResponseStream
from llmload.wire.chunks import DONE, IGNORED, PLAIN, classify_event, interpret_messages_event, is_plain_text_delta
from llmload.wire.endpoints import end_event_for
from llmload.wire.protocol import messages_body

STREAMS = Path(__file__).resolve().parent.parent / "fixtures" / "streams"
EXPECTED = {k: v for k, v in json.loads((STREAMS / "expected.json").read_text()).items()
            if not k.startswith("_") and v["endpoint"] == "messages"}


def ev(name: str, obj: dict, spaced: bool = False) -> tuple[str, bytes]:
    return name, json.dumps(obj, separators=None if spaced else (",", ":")).encode()


def delta(d: dict, spaced: bool = False) -> tuple[str, bytes]:
    return ev("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": d}, spaced)


def test_a_compact_text_delta_is_decided_from_its_bytes_and_a_spaced_one_parsed_the_same():
    assert classify_event(delta({"type": "text_delta", "text": "Hi \"there\""})) is PLAIN
    spaced = classify_event(delta({"type": "text_delta", "text": "Hi"}, spaced=True))
    assert spaced is not PLAIN and spaced.output and spaced.visible and spaced.text == "Hi"
    assert classify_event(delta({"type": "text_delta", "text": "Hi"}), want_text=True).text == "Hi"
    assert classify_event(delta({"type": "text_delta", "text": ""})) is IGNORED
    assert not is_plain_text_delta(b'{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":""}}')


def test_thinking_and_tool_input_are_output_but_not_visible_and_a_signature_is_neither():
    thinking = classify_event(delta({"type": "thinking_delta", "thinking": "Let me see"}))
    assert thinking.output and not thinking.visible
    assert classify_event(delta({"type": "signature_delta", "signature": "EqQB"})) is IGNORED
    assert classify_event(delta({"type": "input_json_delta", "partial_json": ""})) is IGNORED
    piece = classify_event(delta({"type": "input_json_delta", "partial_json": '{"city":'}))
    assert piece.output and not piece.visible
    assert piece.tool_calls == [{"index": 0, "function": {"arguments": '{"city":'}}]
    start = classify_event(ev("content_block_start", {"type": "content_block_start", "index": 1, "content_block": {
        "type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {}}}))
    assert start.output and start.tool_calls[0]["id"] == "toolu_1"
    assert start.tool_calls[0]["function"]["name"] == "get_weather"
    text_start = classify_event(ev("content_block_start", {"type": "content_block_start", "index": 0,
                                                           "content_block": {"type": "text", "text": ""}}))
    assert text_start is IGNORED


def test_usage_comes_from_message_start_and_message_delta_and_the_stream_ends_at_message_stop():
    start = classify_event(ev("message_start", {"type": "message_start", "message": {"usage": {
        "input_tokens": 10, "cache_read_input_tokens": 90, "cache_creation_input_tokens": 5, "output_tokens": 1}}}))
    assert start.usage == {"prompt_tokens": 105, "prompt_tokens_details": {"cached_tokens": 90}}
    end = classify_event(ev("message_delta", {"type": "message_delta", "delta": {"stop_reason": "max_tokens"},
                                              "usage": {"output_tokens": 7}}))
    assert end.finish_reason == "max_tokens" and end.usage == {"completion_tokens": 7}
    assert classify_event(ev("message_stop", {"type": "message_stop"})) is DONE
    assert classify_event(ev("ping", {"type": "ping"})) is IGNORED
    assert classify_event(ev("content_block_stop", {"type": "content_block_stop", "index": 0})) is IGNORED
    acc = R.StreamAccumulator(0.0)
    for chunk, now in ((start, 0.1), (PLAIN, 0.2), (PLAIN, 0.3), (end, 0.4), (DONE, 0.5)):
        acc.add(chunk, now)
    rec = acc.finish(R.RequestMeta("r", 0.0, "s"), "complete", 0.6)
    assert (rec.status, rec.prompt_tokens, rec.cached_tokens, rec.completion_tokens, rec.token_source) == \
        ("ok", 105, 90, 7, "usage")
    assert rec.finish_reason == "max_tokens" and rec.e2e_ms == pytest.approx(500.0)


def test_an_error_event_and_a_bad_count_are_what_chat_makes_of_them():
    err = classify_event(ev("error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}))
    assert err.error == "Overloaded"
    bad = interpret_messages_event({"type": "message_delta", "delta": {}, "usage": {"output_tokens": -1}})
    assert bad.bad and "output_tokens" in bad.bad
    broken = classify_event(("content_block_delta", b'{"type":"content_block_delta","delta":{"type":"text_d'))
    assert broken.bad and "invalid JSON" in broken.bad


@pytest.mark.parametrize(("end_state", "words"), [("complete", "the stream ended without message_stop"),
                                                  ("eof", "connection closed before message_stop")])
def test_a_messages_stream_without_message_stop_is_a_protocol_error(end_state, words):
    acc = R.StreamAccumulator(0.0)
    acc.end_event = end_event_for("/v1/messages")
    acc.add(PLAIN, 0.1)
    acc.add(interpret_messages_event({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}), 0.2)
    rec = acc.finish(R.RequestMeta("r", 0.0, "s"), end_state, 0.3)
    assert rec.status == R.PROTOCOL_ERROR and words in rec.error
    chat = R.StreamAccumulator(0.0)  # chat: a finish reason is enough
    chat.add(PLAIN, 0.1)
    chat.add(interpret_messages_event({"type": "message_delta", "delta": {"stop_reason": "end_turn"}}), 0.2)
    assert chat.finish(R.RequestMeta("r", 0.0, "s"), end_state, 0.3).status == R.OK
    assert end_event_for("/v1/chat/completions") is None and end_event_for("/proxy/v1/messages?beta=1")


def test_the_body_moves_system_messages_to_system_and_the_key_goes_in_x_api_key():
    body = messages_body("m", [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "hi"}], 64,
                         extra={"thinking": {"type": "enabled", "budget_tokens": 1024}})
    assert body == {"model": "m", "messages": [{"role": "user", "content": "hi"}], "system": "Be brief.",
                    "max_tokens": 64, "stream": True, "thinking": {"type": "enabled", "budget_tokens": 1024}}
    opts = for_messages_api(ClientOptions(api_key="sk-ant-x"), key_header_given=False)
    assert opts.request_headers() == [("x-api-key", "sk-ant-x"), ("anthropic-version", "2023-06-01")]
    given = for_messages_api(ClientOptions(api_key="k", api_key_header="Authorization",
                                           headers=(("anthropic-version", "2024-01-01"),)), key_header_given=True)
    assert given.request_headers() == [("Authorization", "Bearer k"), ("anthropic-version", "2024-01-01")]


def replayed(raw: bytes, cuts: list[int]) -> R.RequestRecord:
    """The fast transport's parse of ``raw`` read in the pieces ``cuts`` makes (the read's time is its
    index), finished as FastTransport._exchange finishes a stream."""
    acc = R.StreamAccumulator(0.0)
    acc.end_event = end_event_for("/v1/messages")
    st = ResponseStream(None, acc, Deadlines(60, 60), waiter=None, reader=None)
    bounds = [0, *cuts, len(raw)]
    for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        if st.result is None and b > a:
            st.on_data(raw[a:b], float(i + 1))
    if st.result is None:
        st.on_data(b"", float(len(bounds)))  # the server closed the connection
    state, detail, _ = st.result
    if state == "complete" and st.sse_body:
        for e in st.sse.flush():
            acc.add(classify_event(e), float(len(bounds)))
    return acc.finish(R.RequestMeta("r", 0.0, "s"), state, float(len(bounds)), http_status=st.code, detail=detail)


def fields(rec: R.RequestRecord) -> dict:
    return {"status": rec.status, "http_status": rec.http_status, "completion_tokens": rec.completion_tokens,
            "token_source": rec.token_source, "prompt_tokens": rec.prompt_tokens, "cached_tokens": rec.cached_tokens,
            "finish_reason": rec.finish_reason, "output_events": rec.output_events, "error": rec.error}


@pytest.mark.parametrize("fixture", sorted(EXPECTED))
def test_every_messages_fixture_gives_its_record_however_the_reads_are_split(fixture):
    raw = (STREAMS / f"{fixture}.http").read_bytes()
    exp = EXPECTED[fixture]
    whole = replayed(raw, [])
    want = {k: exp[k] for k in fields(whole) if k != "error"}
    assert {k: v for k, v in fields(whole).items() if k != "error"} == want
    assert (exp["error"] or "") in whole.error and (whole.error == "") == (exp["error"] is None)
    for cut in range(1, len(raw)):
        assert fields(replayed(raw, [cut])) == fields(whole), f"{fixture} split at byte {cut}"
    assert fields(replayed(raw, list(range(1, len(raw))))) == fields(whole), f"{fixture} one byte per read"
    # one event per read: TTFT and TTFT visible are the reads of the expected events
    body_start = raw.index(b"\r\n\r\n") + 4
    ends = [body_start + i + 2 for i in range(len(raw) - body_start) if raw.startswith(b"\n\n", body_start + i)]
    per_event = replayed(raw, ends)
    assert per_event.ttft_ms == pytest.approx((exp["first_output_event"] + 1) * 1000.0)
    assert per_event.ttft_visible_ms == pytest.approx((exp["first_visible_event"] + 1) * 1000.0)


def test_a_messages_stream_cut_before_message_stop_is_a_protocol_error_however_split():
    raw = (STREAMS / "llamacpp_messages.http").read_bytes()
    head, _, body = raw.partition(b"\r\n\r\n")
    payload = b"".join(_dechunk(body))
    payload = payload[:payload.rindex(b"event: message_stop")]  # every event but message_stop, then a whole body
    cut = head + b"\r\n\r\n" + b"%x\r\n%b\r\n0\r\n\r\n" % (len(payload), payload)
    for cuts in ([], [len(cut) // 2], list(range(1, len(cut), 7))):
        rec = replayed(cut, cuts)
        assert rec.status == R.PROTOCOL_ERROR and "without message_stop" in rec.error
        assert rec.completion_tokens == 8 and rec.finish_reason == "max_tokens"


def _dechunk(body: bytes) -> list[bytes]:
    """The payloads of a chunked body."""
    out = []
    while True:
        size_line, _, rest = body.partition(b"\r\n")
        n = int(size_line, 16)
        if n == 0:
            return out
        out.append(rest[:n])
        body = rest[n + 2:]


def test_the_openai_transport_refuses_the_messages_api_with_the_fix():
    from llmload.transport import OpenAITransport

    with pytest.raises(ValueError, match="no Anthropic Messages API; use --transport fast"):
        OpenAITransport("http://127.0.0.1:9", "/v1/messages")
