"""The Anthropic Messages API against the mock: its stream on the wire (text, thinking, tool use),
the fast transport's records against the mock's log, the faults (a cut stream is a protocol error),
and a Locust run with ``--endpoint messages`` whose rows match the mock's log."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from llmload.metrics.record import RequestMeta
from llmload.transport import FastTransport
from llmload.wire.protocol import encode_body, messages_body
from llmload.wire.sse import SSEDecoder
from tests.support.locust_runs import check_against_log, load_rows, run_locust
from tests.support.mock_client import post
from tests.support.processes import ROOT

MESSAGES = os.path.join(ROOT, "locustfiles", "messages.py")
TOOL = {"name": "get_weather", "description": "The weather in a city",
        "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}


def body(max_tokens: int = 6, **extra) -> dict:
    return messages_body("m", [{"role": "system", "content": "be brief"},
                               {"role": "user", "content": "say six words"}], max_tokens,
                         extra={"ignore_eos": True, **extra})


def events(data: bytes) -> list[tuple[str, dict]]:
    return [(name, json.loads(payload)) for name, payload in SSEDecoder().feed(data)]


def test_the_mock_streams_text_thinking_and_tool_use_in_anthropics_shape(fixed_mock):
    status, headers, data = post(fixed_mock, "/v1/messages", body())
    assert status == 200 and headers["content-type"].startswith("text/event-stream")
    evs = events(data)
    assert [n for n, _ in evs] == ["message_start", "content_block_start", *["content_block_delta"] * 6,
                                   "content_block_stop", "message_delta", "message_stop"]
    assert evs[0][1]["message"]["usage"]["input_tokens"] == 5  # "be brief say six words"
    assert evs[-2][1] == {"type": "message_delta", "delta": {"stop_reason": "max_tokens", "stop_sequence": None},
                          "usage": {"output_tokens": 6}}
    _, _, data = post(fixed_mock, "/v1/messages", body(thinking={"type": "enabled", "budget_tokens": 2}))
    deltas = [e["delta"]["type"] for n, e in events(data) if n == "content_block_delta"]
    assert deltas == ["thinking_delta"] * 2 + ["signature_delta"] + ["text_delta"] * 4
    _, _, data = post(fixed_mock, "/v1/messages", body(tools=[TOOL], tool_choice={"type": "any"}))
    evs = events(data)
    assert evs[1][1]["content_block"]["name"] == "get_weather"
    args = "".join(e["delta"]["partial_json"] for n, e in evs if n == "content_block_delta")
    assert "city" in json.loads(args) and evs[-2][1]["delta"]["stop_reason"] == "tool_use"
    status, _, data = post(fixed_mock, "/v1/messages", {**body(), "stream": False})
    answer = json.loads(data)
    assert status == 200 and answer["type"] == "message" and answer["usage"]["output_tokens"] == 6


def stream(mock, rid: str, request: dict, fault: str | None = None):
    t = FastTransport(mock.url, "/v1/messages", timeout=10)
    t.connect()
    try:
        return t.stream(encode_body(request), RequestMeta(rid, 0.0, "messages", max_tokens=request["max_tokens"]),
                        headers={"X-Mock-Fault": fault} if fault else None)
    finally:
        t.close()


def test_records_match_the_mocks_log_and_a_cut_stream_is_a_protocol_error(fixed_mock):
    text = stream(fixed_mock, "text", body(8))
    thinking = stream(fixed_mock, "thinking", body(8, thinking={"type": "enabled", "budget_tokens": 3}))
    tool = stream(fixed_mock, "tool", body(8, tools=[TOOL], tool_choice={"type": "tool", "name": "get_weather"}))
    cut = stream(fixed_mock, "cut", body(8), fault="disconnect:3")
    failed = stream(fixed_mock, "failed", body(8), fault="stream_error:3")
    log = fixed_mock.log_by_id(expect=5)
    for rec in (text, thinking, tool):
        e = log[rec.meta.request_id]
        assert rec.status == "ok", rec.error
        assert (rec.completion_tokens, rec.prompt_tokens, rec.token_source) == (e["tokens_sent"], e["prompt_tokens"],
                                                                                "usage")
        assert rec.cached_tokens == e["cached_tokens"]
    assert text.finish_reason == "max_tokens" and text.output_events == 8
    assert thinking.ttft_visible_ms - thinking.ttft_ms > 2 * 3  # three thinking tokens 4 ms apart come first
    assert tool.finish_reason == "tool_use" and tool.ttft_visible_ms is None
    assert cut.status == "protocol_error" and "before message_stop" in cut.error
    assert log["cut"]["outcome"] == "fault:disconnect"
    assert failed.status == "stream_error" and "error inside the stream" in failed.error


def test_a_locust_run_with_endpoint_messages_matches_the_mocks_log_and_is_priced(mock_factory, tmp_path):
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "30", "--itl-ms", "5")
    prefix = tmp_path / "msg"
    res = run_locust(["-f", MESSAGES, "--host", mock.url, "-u", "4", "-r", "4", "--csv", str(prefix), "--headless",
                      "-t", "4s", "--stop-timeout", "5", "--ignore-eos", "--output-tokens", "20", "--input-tokens",
                      "32"], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = load_rows(prefix)
    assert len(rows[rows["status"] == "ok"]) >= 20
    check_against_log(rows, mock, expect_users=4)
    out = tmp_path / "report"
    rep = subprocess.run([sys.executable, "-m", "llmload.cli", "report", str(prefix), "--warmup-s", "1", "--slo",
                          "ttft_p95_ms=5000", "--gpu-hourly-usd", "2.0", "--out", str(out)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert rep.returncode == 0, rep.stderr
    data = json.loads((out / "report.json").read_text())
    cost = data["cost"]
    assert cost and cost["usd_per_million_output_tokens"] > 0, sorted(data)
