"""llama.cpp's recorded bytes (tests/fixtures/real/llamacpp/) replayed over a real socket to the
fast transport: the record must say what llama-server said. Needs no build.

Each expectation is read from the recorded response itself (its usage, its timings, its error),
not written here.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from gevent.server import StreamServer

from llmload.metrics.record import OK, RequestMeta
from llmload.transport import FastTransport
from tests.support.llamacpp import split_response, sse_events

FIXTURES = Path(__file__).parent.parent / "fixtures" / "real" / "llamacpp"


def replay(name: str, path: str):
    """Serve the recorded response once, byte for byte, after reading the whole request."""
    raw = (FIXTURES / f"{name}.response.http").read_bytes()

    def handle(sock, _addr):
        data = b""
        while b"\r\n\r\n" not in data:
            data += sock.recv(65536)
        head, _, body = data.partition(b"\r\n\r\n")
        length = next(int(line.split(b":")[1]) for line in head.split(b"\r\n")
                      if line.lower().startswith(b"content-length:"))
        while len(body) < length:
            body += sock.recv(65536)
        sock.sendall(raw)
        sock.close()

    server = StreamServer(("127.0.0.1", 0), handle)
    server.start()
    try:
        t = FastTransport(f"http://127.0.0.1:{server.server_port}", path, timeout=10)
        request = (FIXTURES / f"{name}.request.http").read_bytes().partition(b"\r\n\r\n")[2]
        return t.stream(request, RequestMeta(request_id=name, start_time=0.0, scenario="replay"))
    finally:
        server.stop()


def recorded(name: str) -> tuple[int, list[dict]]:
    status, _, body = split_response((FIXTURES / f"{name}.response.http").read_bytes())
    events = sse_events(body)
    assert events[-1] == "[DONE]"
    return status, [json.loads(e) for e in events[:-1]]


@pytest.mark.parametrize("name", ["chat_stream_include_usage", "chat_stream_cached_prefix"])
def test_chat_with_usage(name):
    _, chunks = recorded(name)
    usage = chunks[-1]["usage"]
    rec = replay(name, "/v1/chat/completions")
    assert rec.status == OK, rec.error
    assert (rec.token_source, rec.completion_tokens, rec.prompt_tokens, rec.cached_tokens) == (
        "usage", usage["completion_tokens"], usage["prompt_tokens"], usage["prompt_tokens_details"]["cached_tokens"])
    assert rec.finish_reason == chunks[-2]["choices"][0]["finish_reason"]


def test_cached_prefix_fixture_has_cached_tokens():
    _, chunks = recorded("chat_stream_cached_prefix")
    assert chunks[-1]["usage"]["prompt_tokens_details"]["cached_tokens"] > 0


def test_chat_without_usage_counts_one_chunk_per_token():
    _, chunks = recorded("chat_stream_no_usage")
    assert all("usage" not in c for c in chunks)
    rec = replay("chat_stream_no_usage", "/v1/chat/completions")
    assert rec.status == OK, rec.error
    # llama.cpp's own count rides on the last chunk's timings; the tiny model sends a chunk per token.
    assert (rec.token_source, rec.completion_tokens) == ("chunks", chunks[-1]["timings"]["predicted_n"])


def test_completions_stream():
    _, chunks = recorded("completions_stream")
    rec = replay("completions_stream", "/v1/completions")
    assert rec.status == OK, rec.error
    assert (rec.token_source, rec.completion_tokens) == ("usage", chunks[-1]["usage"]["completion_tokens"])
    assert rec.finish_reason == chunks[-1]["choices"][0]["finish_reason"]


def test_context_overflow_error():
    status, _, body = split_response((FIXTURES / "error_context_overflow.response.http").read_bytes())
    error = json.loads(body)["error"]
    assert error["type"] == "exceed_context_size_error"
    rec = replay("error_context_overflow", "/v1/chat/completions")
    assert (rec.status, rec.http_status) == ("http_4xx", status)
    assert error["message"] in rec.error


def test_metrics_text_names():
    status, headers, body = split_response((FIXTURES / "metrics.response.http").read_bytes())
    assert status == 200 and headers["content-type"].startswith("text/plain")
    names = {line.split()[0] for line in body.decode().splitlines() if line and not line.startswith("#")}
    assert {"llamacpp:prompt_tokens_total", "llamacpp:tokens_predicted_total", "llamacpp:requests_processing",
            "llamacpp:prompt_tokens_cached_total"} <= names
