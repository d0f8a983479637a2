"""Audio transcription against the mock: its multipart parse and cost per second of audio, the fast
transport's records (streamed: TTFT, truncation, an empty transcript; whole: a missing text is a
protocol error), and a Locust run whose rows match the mock's log (count, audio seconds, status)
and whose report shows RTFx and prices an audio hour."""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import textwrap

import pytest

from llmload.metrics import record as R
from llmload.metrics.record import RequestMeta
from llmload.transport.fast import FastTransport
from llmload.wire.audio import check_transcription, multipart_body, multipart_content_type, transcription_fields
from llmload.workload.endpoints.audio import synth_wav
from tests.support.locust_runs import llmload_lines, load_rows, run, run_locust
from tests.support.processes import ROOT

AUDIO = os.path.join(ROOT, "locustfiles", "audio.py")
CHAT = os.path.join(ROOT, "locustfiles", "chat.py")
BOUNDARY = "llmload-e2e-audio"


def transcribe(mock, rid: str, seconds: float, stream: bool, fault: str | None = None,
               response_format: str = "json") -> R.RequestRecord:
    t = FastTransport(mock.url, "/v1/audio/transcriptions", timeout=10, content_type=multipart_content_type(BOUNDARY),
                      accept="text/event-stream" if stream else "application/json")
    t.connect()
    body = multipart_body(transcription_fields("m", "en", response_format, stream=stream), "clip.wav",
                          synth_wav(seconds, 3), "audio/wav", BOUNDARY)

    def check(data: bytes, meta: RequestMeta, latency_ms: float, code: int) -> R.RequestRecord:
        result = check_transcription(data, response_format)
        if result.error is None and result.empty:
            return R.RequestRecord(meta=meta, status=R.EMPTY, http_status=code, e2e_ms=latency_ms)
        return R.whole_body_record(meta, latency_ms, code, result.error, None)

    try:
        return t.stream(body, RequestMeta(rid, 0.0, "audio", audio_seconds=seconds),
                        headers={"X-Mock-Fault": fault} if fault else None, check_body=None if stream else check)
    finally:
        t.close()


def test_records_match_the_mocks_log_and_a_missing_text_is_a_protocol_error(mock_factory):
    mock = mock_factory("--profile", "fixed", "--audio-rtfx", "50", "--audio-itl-ms", "3")
    streamed = transcribe(mock, "s", 2.0, stream=True)
    whole = transcribe(mock, "w", 2.0, stream=False)
    verbose = transcribe(mock, "v", 1.0, stream=False, response_format="verbose_json")
    missing = transcribe(mock, "m", 1.0, stream=False, fault="missing_text")
    cut_json = transcribe(mock, "c", 1.0, stream=False, fault="no_final_chunk")
    no_final = transcribe(mock, "n", 1.0, stream=True, fault="no_final_chunk")
    silent = transcribe(mock, "e", 1.0, stream=True, fault="missing_text")
    busy = transcribe(mock, "b", 1.0, stream=True, fault="503")
    log = mock.log_by_id(expect=8)
    assert streamed.status == "ok" and streamed.finish_reason == "stop"
    assert streamed.completion_tokens == log["s"]["tokens_sent"] == 5 and streamed.token_source == "usage"
    assert streamed.prompt_tokens == log["s"]["prompt_tokens"] == 100
    # 2 s of audio at RTFx 50: 40 ms before the first words; 4 more words 3 ms apart. The end is held to
    # the start, not to the first word: a client descheduled as the first word came read it late
    # (45.1 ms beside a busy loop) and the last one 11.0 ms after it.
    assert streamed.ttft_ms >= 40 - 0.5 and streamed.e2e_ms >= 40 + 4 * 3 - 0.5
    assert streamed.ttft_ms >= (log["s"]["first_token_mono"] - log["s"]["arrival_mono"]) * 1000 - 0.5
    assert streamed.e2e_ms >= (log["s"]["last_token_mono"] - log["s"]["arrival_mono"]) * 1000 - 0.5
    assert whole.status == "ok" and whole.ttft_ms is None and whole.e2e_ms >= 40 + 4 * 3 - 0.5
    assert verbose.status == "ok"
    assert missing.status == "protocol_error" and "got no text" in missing.error
    assert cut_json.status == "protocol_error" and "invalid JSON" in cut_json.error
    assert no_final.status == "truncated" and no_final.output_events == 3
    assert silent.status == "empty"
    assert busy.status == "http_5xx" and busy.http_status == 503
    assert {k: log[k]["outcome"] for k in "swmcneb"} == {
        "s": "completed", "w": "completed", "m": "fault:missing_text", "c": "fault:no_final_chunk",
        "n": "fault:no_final_chunk", "e": "fault:missing_text", "b": "fault:503"}
    assert [log[k]["audio_seconds"] for k in "swv"] == [2.0, 2.0, 1.0]
    # vLLM has no transcription metric of its own: the engine's counters count them, and so do the mock's
    conn = http.client.HTTPConnection("127.0.0.1", mock.port, timeout=30)
    conn.request("GET", "/metrics")
    metrics = conn.getresponse().read().decode()
    conn.close()
    generated = next(float(line.rsplit(" ", 1)[1]) for line in metrics.splitlines()
                     if line.startswith("vllm:generation_tokens_total"))
    assert generated == sum(log[k]["tokens_sent"] for k in log)
    # by vLLM's finished_reason: the 3 answered in full stop, the 4 faulted streams and bodies are errors
    assert 'finished_reason="stop"} 3' in metrics and 'finished_reason="error"} 4' in metrics


def test_the_mock_refuses_an_upload_it_cannot_read_with_a_400(mock_factory):
    mock = mock_factory("--profile", "fixed")
    conn = http.client.HTTPConnection("127.0.0.1", mock.port, timeout=30)
    conn.request("POST", "/v1/audio/transcriptions", b'{"file": "x"}', {"Content-Type": "application/json"})
    resp = conn.getresponse()
    assert resp.status == 400 and b"expected multipart/form-data" in resp.read()
    body = multipart_body([("model", "m")], "talk.mp3", b"ID3\x04", "audio/mpeg", BOUNDARY)
    conn.request("POST", "/v1/audio/transcriptions", body, {"Content-Type": multipart_content_type(BOUNDARY)})
    resp = conn.getresponse()
    assert resp.status == 400 and b"talk_12.5s.mp3" in resp.read()
    conn.close()


LOCUSTFILE = """
from llmload import LLMAudioUser


class Streamed(LLMAudioUser):
    audio_seconds = "1-4"
    clips = 4
    stream = True


class Whole(LLMAudioUser):
    audio_seconds = "1-4"
    clips = 4
    stream = False
"""


def test_a_locust_run_matches_the_mocks_log_and_the_report_gives_rtfx_and_the_audio_hours_price(mock_factory,
                                                                                                  tmp_path):
    mock = mock_factory("--profile", "fixed", "--audio-rtfx", "100", "--audio-itl-ms", "1",
                        "--fault", "missing_text=0.1", "--seed", "4")
    locustfile = tmp_path / "audio_users.py"
    locustfile.write_text(textwrap.dedent(LOCUSTFILE))
    prefix = tmp_path / "audio"
    res = run_locust(["-f", str(locustfile), "--host", mock.url, "-u", "4", "-r", "4", "--csv", str(prefix),
                      "--headless", "-t", "5s", "--stop-timeout", "10", "--seed", "9", "--exit-code-on-error", "0"],
                     tmp_path)  # the faults fail requests on purpose
    assert res.returncode == 0, res.stderr[-3000:]
    rows = load_rows(prefix)
    log = mock.log_by_id(expect=len(rows))
    # every request the mock saw has its row; one cut off by the end of the test may not have reached it
    assert set(log) <= set(rows["request_id"]) and len(rows) >= 40
    assert set(rows["status"]) <= {"ok", "protocol_error", "empty", "cancelled"}
    done = rows[rows["status"] != "cancelled"]
    assert set(done["request_id"]) <= set(log) and len(done) >= len(rows) - 4  # at most one in flight per user
    streamed = {rid for rid, e in log.items() if e["stream"]}
    for r in done.itertuples():
        e = log[r.request_id]
        assert r.audio_seconds == pytest.approx(e["audio_seconds"], abs=1e-3)
        want = "ok" if e["outcome"] == "completed" else "empty" if r.request_id in streamed else "protocol_error"
        assert (e["outcome"], r.status) in {("completed", "ok"), ("fault:missing_text", want)} and r.status == want
    assert rows["audio_seconds"].between(1.0, 4.0).all() and rows["audio_seconds"].nunique() > 1
    assert (rows["status"] == "protocol_error").any() and (rows["status"] == "ok").sum() >= 30
    ok = rows[rows["status"] == "ok"]
    assert ok[ok["request_id"].isin(streamed)]["ttft_ms"].notna().all()
    out = tmp_path / "report"
    rep = subprocess.run([sys.executable, "-m", "llmload.cli", "report", str(prefix), "--warmup-s", "1",
                          "--error-budget", "off", "--gpu-hourly-usd", "2.0", "--out", str(out)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert rep.returncode == 0, rep.stderr
    data = json.loads((out / "report.json").read_text())
    step = data["steps"][0]
    # RTFx: the audio seconds of ok requests per second, each spread over its lifetime, as rps is
    assert step["rtfx"] == pytest.approx(step["rps"] * ok["audio_seconds"].mean(), rel=0.15)
    per_request = (ok["audio_seconds"] / (ok["e2e_ms"] / 1000.0)).median()
    assert step["request_rtfx"]["p50"] == pytest.approx(per_request, rel=0.25)
    assert data["capacity"]["rtfx"] == step["rtfx"]
    assert data["cost"]["usd_per_audio_hour"] == pytest.approx(2.0 / data["capacity"]["rtfx"], rel=1e-3)
    text = (out / "report.md").read_text()
    assert "RTFx at capacity" in text and "$ per audio hour" in text


LONG_CLIPS = "from llmload import LLMAudioUser\n\n\nclass LongUser(LLMAudioUser):\n    audio_seconds = '60-1200'\n"


@pytest.mark.parametrize(("args", "message"), [
    ([CHAT, "--endpoint", "audio"], "--endpoint audio: ChatUser sends chat; transcription runs in LLMAudioUser"),
    ([AUDIO, "--transport", "openai"], "--transport openai: TranscribeUser (audio) runs on the fast transport only"),
    (["long_clips.py"], "LongUser.audio_seconds: a draw can be 1200 s; a synthetic clip is at most 819.1 s"),
])
def test_audio_on_a_chat_user_or_the_openai_sdk_fails_once_at_init(tmp_path, args, message):
    (tmp_path / "long_clips.py").write_text(LONG_CLIPS)  # a bad setting: one line at init, not one per user
    res = run([sys.executable, "-m", "locust", "-f", *args, "--host", "http://127.0.0.1:9", "--headless", "-u", "2",
               "-r", "2", "-t", "3s"], tmp_path)
    assert res.returncode == 1, res.stdout[-1000:] + res.stderr[-2000:]
    lines = llmload_lines(res)
    assert len(lines) == 1 and message in lines[0], lines
