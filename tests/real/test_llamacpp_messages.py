"""The Anthropic Messages API (/v1/messages) against the suite's llama-server (llama.cpp 0c1e57098
serves it: tools/server, ``format_anthropic_sse``): a stream through the fast transport, its usage
(input tokens and cache reads from message_start, output tokens from message_delta) and its end."""

from __future__ import annotations

import json

from llmload.metrics.record import OK, RequestMeta
from llmload.transport import FastTransport
from llmload.transport.connection import ClientOptions, for_messages_api
from llmload.wire.protocol import messages_body
from tests.support.llamacpp import LlamaServer, llama_server_fixture, tiny_model_fixture  # noqa: F401


def stream(server: LlamaServer, rid: str, max_tokens: int):
    body = messages_body(server.model_alias, [{"role": "system", "content": "Be brief."},
                                              {"role": "user", "content": f"Say something, {rid}."}], max_tokens,
                         sampling={"temperature": 0})
    t = FastTransport(server.url, "/v1/messages", for_messages_api(ClientOptions(timeout=60, api_key="k"), False))
    t.connect()
    try:
        return t.stream(json.dumps(body).encode(), RequestMeta(request_id=rid, start_time=0.0, scenario="x"))
    finally:
        t.close()


def test_a_messages_stream_from_llama_server_gives_the_whole_record(llama_server):
    first = stream(llama_server, "a", 8)
    assert first.status == OK, first.error
    assert (first.completion_tokens, first.token_source, first.finish_reason) == (8, "usage", "max_tokens")
    assert first.output_events == 8 and first.prompt_tokens > 0 and first.ttft_visible_ms == first.ttft_ms
    again = stream(llama_server, "a", 8)  # the same prompt: llama.cpp reports its cache reads
    assert again.status == OK and again.prompt_tokens == first.prompt_tokens
    assert again.cached_tokens is not None and again.cached_tokens > 0
