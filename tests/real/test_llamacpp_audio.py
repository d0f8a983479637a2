"""Audio transcription against the real llama-server (the suite's build, llama.cpp 0c1e57098): it
registers ``/v1/audio/transcriptions``, but transcribes only with a model that takes audio input (a
multimodal projector with an audio encoder); the suite's tiny text model is not one, and nothing
is downloaded. What is held: llmload's multipart upload reaches the route, and the server's 501
is recorded as ``http_5xx`` with its message, streamed or not."""

from __future__ import annotations

import pytest

from llmload.metrics import record as R
from llmload.transport.fast import FastTransport
from llmload.wire.audio import check_transcription, multipart_body, multipart_content_type, transcription_fields
from llmload.workload.endpoints.audio import synth_wav
from tests.support.llamacpp import MODEL_ALIAS, LlamaServer, llama_server_fixture, tiny_model_fixture  # noqa: F401

BOUNDARY = "llmload-real-audio"


@pytest.mark.parametrize("stream", [False, True])
def test_llama_server_refuses_a_transcription_for_a_text_model_and_llmload_records_why(llama_server: LlamaServer,
                                                                                        stream: bool):
    t = FastTransport(llama_server.url, "/v1/audio/transcriptions", timeout=60,
                      content_type=multipart_content_type(BOUNDARY),
                      accept="text/event-stream" if stream else "application/json")
    t.connect()
    body = multipart_body(transcription_fields(MODEL_ALIAS, "en", stream=stream), "clip.wav", synth_wav(2.0, 1),
                          "audio/wav", BOUNDARY)

    def check(data: bytes, meta: R.RequestMeta, latency_ms: float, code: int) -> R.RequestRecord:
        return R.whole_body_record(meta, latency_ms, code, check_transcription(data, "json").error, None)

    try:
        rec = t.stream(body, R.RequestMeta("a", 0.0, "audio", audio_seconds=2.0),
                       check_body=None if stream else check)
    finally:
        t.close()
    assert (rec.status, rec.http_status) == (R.HTTP_5XX, 501), rec.error
    assert "does not support audio input" in rec.error
