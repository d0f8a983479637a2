"""Audio transcription, pure parts: the multipart body and the mock's parse of it, audio lengths from
headers (WAV, FLAC) and names, the synthetic clips, what a whole answer must hold, the mock's
answers, the report's price of an audio hour, and every transcription fixture fed through the fast
transport's response parser split at every byte offset."""

from __future__ import annotations

import io
import json
import random
import wave
from pathlib import Path

import pytest

from llmload.metrics import record as R
from llmload.mock.api.audio_api import (
    TranscriptionFormatter,
    parse_multipart,
    parse_transcription,
    transcript_words,
    whole_answer,
)
from llmload.mock.api.openai_api import BadRequest
from llmload.report.capacity import cost_at
from llmload.transport.stream import Deadlines, ResponseStream
from llmload.wire.audio import (
    audio_seconds,
    check_transcription,
    multipart_body,
    multipart_content_type,
    transcription_fields,
)
from llmload.wire.chunks import classify_event
from llmload.workload.distributions import parse_distribution
from llmload.workload.endpoints.audio import AudioWorkload, clip_pool, folder_clips, synth_wav, synthetic_clips

pytestmark = pytest.mark.unit

STREAMS = Path(__file__).resolve().parent.parent / "fixtures" / "streams"
EXPECTED = {k: v for k, v in json.loads((STREAMS / "expected.json").read_text()).items()
            if not k.startswith("_") and v["endpoint"] == "audio"}
BOUNDARY = "llmload-test-7f3a"


def flac_header(rate: int, total: int) -> bytes:
    """fLaC + a last-block STREAMINFO of 34 bytes: rate (20 bits), channels-1, bps-1, total samples (36)."""
    bits = (rate << 44) | (0 << 41) | (15 << 36) | total
    info = bytes(10) + bits.to_bytes(8, "big") + bytes(16)
    return b"fLaC" + bytes([0x80, 0, 0, 34]) + info


def test_a_synthetic_clip_is_16_khz_mono_16_bit_of_its_length_and_the_same_for_a_seed():
    data = synth_wav(2.5, seed=7)
    with wave.open(io.BytesIO(data)) as w:
        assert (w.getframerate(), w.getnchannels(), w.getsampwidth(), w.getnframes()) == (16000, 1, 2, 40000)
    assert audio_seconds("x.wav", data) == 2.5
    assert synth_wav(2.5, seed=7) == data and synth_wav(2.5, seed=8) != data


def test_clips_draw_their_lengths_from_the_distribution_and_the_pool_is_built_once_per_process():
    lengths = parse_distribution("2-4", "audio_seconds", integer=False, minimum=0.1)
    clips = synthetic_clips(lengths, 5, seed=3)
    assert [c.seconds for c in clips] == [c.seconds for c in synthetic_clips(lengths, 5, seed=3)]
    assert all(2.0 <= c.seconds <= 4.0 for c in clips) and len({c.seconds for c in clips}) == 5
    built = []
    fields = transcription_fields("m", stream=True)

    def make():
        built.append(1)
        return clips

    first = clip_pool(("t", 1), make, fields, 3)
    assert clip_pool(("t", 1), make, fields, 3) is first and built == [1]
    w = AudioWorkload("audio", first[0], fields, seed=11, bodies=first[2], boundary=first[1])
    picks = [w.next_request() for _ in range(20)]
    assert {p.clip for p in picks} <= {c.name for c in clips}
    assert all(p.body is first[2][[c.name for c in clips].index(p.clip)] for p in picks)  # shared, not copied


def test_the_body_is_form_data_the_mock_reads_back_with_its_fields_and_length():
    audio = synth_wav(3.0, seed=1)
    fields = transcription_fields("whisper", language="de", response_format="text", temperature=0.2, stream=True)
    assert fields == [("model", "whisper"), ("language", "de"), ("response_format", "text"), ("temperature", "0.2"),
                      ("stream", "true"), ("stream_include_usage", "true")]
    body = multipart_body(fields, "clip.wav", audio, "audio/wav", BOUNDARY)
    parts = parse_multipart(body, multipart_content_type(BOUNDARY))
    assert parts["file"] == ("clip.wav", audio)
    assert {k: v[1].decode() for k, v in parts.items() if k != "file"} == dict(fields)
    ask = parse_transcription(body, multipart_content_type(BOUNDARY), "mock")
    assert (ask.model, ask.audio_seconds, ask.response_format, ask.language, ask.stream, ask.include_usage) == \
        ("whisper", 3.0, "text", "de", True, True)
    assert ask.words == 8 and ask.prompt_tokens == 150
    with pytest.raises(ValueError, match="boundary"):
        multipart_body(fields, "x.wav", b"..." + BOUNDARY.encode(), "audio/wav", BOUNDARY)


@pytest.mark.parametrize(("mutate", "message"), [
    (lambda b, ct: (b, "application/json"), "expected multipart/form-data"),
    (lambda b, ct: (b, "multipart/form-data"), "boundary of 1 to 70"),
    (lambda b, ct: (b[:-10], ct), "cut off"),
    (lambda b, ct: (b.replace(b'name="file"; filename="clip.wav"', b'name="upload"'), ct), "file: expected an audio"),
    (lambda b, ct: (b.replace(b"RIFF", b"RIFX", 1), ct), "put it in the name"),
    (lambda b, ct: (b.replace(b"\r\njson\r\n", b"\r\nsrt\r\n"), ct), "only support response_format"),
])
def test_the_mock_answers_a_bad_upload_with_a_400_that_says_what_is_wrong(mutate, message):
    body = multipart_body(transcription_fields("m"), "clip.wav", synth_wav(0.5, 2), "audio/wav", BOUNDARY)
    bad, ctype = mutate(body, multipart_content_type(BOUNDARY))
    with pytest.raises(BadRequest, match=message):
        parse_transcription(bad, ctype, "mock")


def test_verbose_json_cannot_stream_and_stream_options_need_a_stream():
    wav = synth_wav(0.5, 2)
    ct = multipart_content_type(BOUNDARY)
    body = multipart_body([("response_format", "verbose_json"), ("stream", "true")], "a.wav", wav, "audio/wav",
                          BOUNDARY)
    with pytest.raises(BadRequest, match="verbose_json format doesn't support streaming"):
        parse_transcription(body, ct, "mock")
    body = multipart_body([("stream_include_usage", "true")], "a.wav", wav, "audio/wav", BOUNDARY)
    with pytest.raises(BadRequest, match="only be defined when `stream=True`"):
        parse_transcription(body, ct, "mock")


def test_lengths_come_from_a_wav_or_flac_header_or_else_from_the_name(tmp_path):
    assert audio_seconds("a.flac", flac_header(48000, 48000 * 7)) == 7.0
    assert audio_seconds("talk_12.5s.mp3", b"ID3...") == 12.5
    with pytest.raises(ValueError, match=r"talk\.mp3: .*talk_12\.5s\.mp3"):
        audio_seconds("talk.mp3", b"ID3...")
    with pytest.raises(ValueError, match="does not give the length"):
        audio_seconds("b.flac", flac_header(44100, 0))
    (tmp_path / "b.wav").write_bytes(synth_wav(1.5, 1))
    (tmp_path / "a.flac").write_bytes(flac_header(16000, 32000))
    (tmp_path / "c_4s.ogg").write_bytes(b"OggS")
    (tmp_path / "notes.txt").write_text("not audio")
    assert [(c.name, c.seconds, c.content_type) for c in folder_clips(tmp_path)] == [
        ("a.flac", 2.0, "audio/flac"), ("b.wav", 1.5, "audio/wav"), ("c_4s.ogg", 4.0, "audio/ogg")]
    (tmp_path / "d.mp3").write_bytes(b"ID3")
    with pytest.raises(ValueError, match=r"d\.mp3: .*in the name"):
        folder_clips(tmp_path)
    with pytest.raises(ValueError, match="no audio file"):
        folder_clips(_empty(tmp_path))


def _empty(tmp_path: Path) -> Path:
    d = tmp_path / "empty"
    d.mkdir()
    return d


@pytest.mark.parametrize(("body", "fmt", "error", "empty"), [
    (b'{"text":"hello there","usage":{"type":"duration","seconds":3}}', "json", None, False),
    (b'{"text":"","usage":{"type":"duration","seconds":3}}', "json", None, True),
    (b'{"usage":{"type":"duration","seconds":3}}', "json", "expected a JSON object with a text string, got no text",
     False),
    (b'{"text":7}', "json", "got text of type int", False),
    (b'{"text":"hi', "json", "invalid JSON", False),
    (b'["hi"]', "json", "not a JSON object", False),
    (b'{"duration":"3.0","language":"en","text":"hi","segments":[],"words":null}', "verbose_json", None, False),
    (b"hello there\n", "text", None, False),
    (b"\n", "text", None, True),
    (b'{"text":"vLLM sends JSON for text too"}', "text", None, False),
    (b'{"error":{"message":"boom"}}', "json", "error object in a 2xx answer: boom", False),
])
def test_a_whole_answer_counts_when_it_holds_a_transcript(body, fmt, error, empty):
    got = check_transcription(body, fmt)
    if error is None:
        assert got.error is None
    else:
        assert error in (got.error or ""), got.error
    assert got.empty == empty


def test_the_mock_answers_in_vllms_shapes_and_its_faults_leave_the_text_out():
    ask = parse_transcription(multipart_body([("response_format", "json")], "a.wav", synth_wav(2.0, 1), "audio/wav",
                                             BOUNDARY), multipart_content_type(BOUNDARY), "mock")
    words = transcript_words(ask.words)
    assert len(words) == 5 and all(w.startswith(" ") for w in words)
    assert json.loads(whole_answer(ask, "so the")) == {"text": "so the", "usage": {"type": "duration", "seconds": 2}}
    assert "text" not in json.loads(whole_answer(ask, "so the", missing_text=True))
    fmt = TranscriptionFormatter("transcribe-1", "mock", 5)
    assert fmt.chunk(" so") == (b'data: {"id":"transcribe-1","object":"transcription.chunk","created":5,'
                                b'"model":"mock","choices":[{"delta":{"content":" so"}}]}\n\n')
    assert b'"finish_reason":"stop","stop_reason":null' in fmt.chunk("", "stop")
    assert json.loads(fmt.usage(100, 6)[6:])["usage"] == {"prompt_tokens": 100, "total_tokens": 106,
                                                          "completion_tokens": 6}


def test_an_hour_of_audio_costs_the_replicas_hour_over_the_rtfx_at_capacity():
    cost = cost_at({"rps": 2.0, "goodput_rps": 2.0, "output_tps": 10.0, "total_tps": 10.0}, 3.0, 2, rtfx=40.0)
    assert cost["usd_per_audio_hour"] == pytest.approx(6.0 / 40.0)
    assert "usd_per_audio_hour" not in cost_at({"rps": 2.0}, 3.0, 1)


# -- the transcription fixtures through the fast transport's parser --------------------------------------------

def replayed(raw: bytes, cuts: list[int]) -> R.RequestRecord:
    """The fast transport's parse of ``raw`` read in the pieces ``cuts`` makes (the read's time is its
    index), finished as FastTransport._exchange finishes a stream."""
    acc = R.StreamAccumulator(0.0)
    st = ResponseStream(None, acc, Deadlines(60, 60), waiter=None, reader=None)
    bounds = [0, *cuts, len(raw)]
    for i, (a, b) in enumerate(zip(bounds, bounds[1:], strict=False)):
        if st.result is None and b > a:
            st.on_data(raw[a:b], float(i + 1))
    if st.result is None:
        st.on_data(b"", float(len(bounds)))
    state, detail, _ = st.result
    if state == "complete" and st.sse_body:
        for e in st.sse.flush():
            acc.add(classify_event(e), float(len(bounds)))
    return acc.finish(R.RequestMeta("r", 0.0, "s"), state, float(len(bounds)), http_status=st.code, detail=detail)


def fields(rec: R.RequestRecord) -> dict:
    return {"status": rec.status, "http_status": rec.http_status, "completion_tokens": rec.completion_tokens,
            "token_source": rec.token_source, "prompt_tokens": rec.prompt_tokens, "cached_tokens": rec.cached_tokens,
            "finish_reason": rec.finish_reason, "output_events": rec.output_events, "error": rec.error}


def test_there_are_transcription_fixtures():
    assert sorted(EXPECTED) == ["vllm_transcription", "vllm_transcription_long"]


@pytest.mark.parametrize("fixture", sorted(EXPECTED))
def test_every_transcription_fixture_gives_its_record_however_the_reads_are_split(fixture):
    raw = (STREAMS / f"{fixture}.http").read_bytes()
    exp = EXPECTED[fixture]
    whole = replayed(raw, [])
    assert {k: v for k, v in fields(whole).items() if k != "error"} == {k: exp[k] for k in fields(whole)
                                                                        if k != "error"}
    assert whole.error == ""
    for cut in range(1, len(raw)):
        assert fields(replayed(raw, [cut])) == fields(whole), f"{fixture} split at byte {cut}"
    assert fields(replayed(raw, list(range(1, len(raw))))) == fields(whole), f"{fixture} one byte per read"
    body_start = raw.index(b"\r\n\r\n") + 4
    ends = [body_start + i + 2 for i in range(len(raw) - body_start) if raw.startswith(b"\n\n", body_start + i)]
    per_event = replayed(raw, ends)  # one event per read: TTFT is the read of the first text chunk
    assert per_event.ttft_ms == pytest.approx((exp["first_output_event"] + 1) * 1000.0)
    assert per_event.e2e_ms == pytest.approx(len(ends) * 1000.0)  # the end: [DONE]


def _dechunk(body: bytes) -> list[bytes]:
    out = []
    while True:
        size_line, _, rest = body.partition(b"\r\n")
        n = int(size_line, 16)
        if n == 0:
            return out
        out.append(rest[:n])
        body = rest[n + 2:]


def test_a_transcription_stream_without_its_final_chunk_is_truncated_however_split():
    raw = (STREAMS / "vllm_transcription.http").read_bytes()
    head, _, body = raw.partition(b"\r\n\r\n")
    payload = b"".join(_dechunk(body))
    payload = payload[:payload.index(b'"finish_reason"')]
    payload = payload[:payload.rindex(b"data: ")]  # every text chunk, then the body ends cleanly
    cut = head + b"\r\n\r\n" + b"%x\r\n%b\r\n0\r\n\r\n" % (len(payload), payload)
    rng = random.Random(5)
    for cuts in ([], [len(cut) // 2], sorted(rng.sample(range(1, len(cut)), 40)), list(range(1, len(cut), 3))):
        rec = replayed(cut, cuts)
        assert rec.status == R.TRUNCATED and "without [DONE] or finish_reason" in rec.error
        assert rec.output_events == 10


def test_the_mocks_form_parser_is_bounded():
    ct = multipart_content_type(BOUNDARY)
    wav = synth_wav(0.2, 1)
    many = multipart_body([(f"f{i}", "x") for i in range(64)], "a.wav", wav, "audio/wav", BOUNDARY)
    with pytest.raises(BadRequest, match="more than 64 parts"):
        parse_multipart(many, ct)
    long_field = multipart_body([("model", "m" * 5000)], "a.wav", wav, "audio/wav", BOUNDARY)
    with pytest.raises(BadRequest, match="model: longer than 4096 bytes"):
        parse_transcription(long_field, ct, "mock")
    long_head = long_field.replace(b'name="model"', b'name="model"; x="' + b"y" * 5000 + b'"')
    with pytest.raises(BadRequest, match="headers do not end within 4096 bytes"):
        parse_multipart(long_head, ct)
    with pytest.raises(BadRequest, match="stream: expected true or false"):
        parse_transcription(multipart_body([("stream", "maybe")], "a.wav", wav, "audio/wav", BOUNDARY), ct, "mock")


def _audio_class(**settings):
    from llmload import LLMAudioUser

    return type("TalkUser", (LLMAudioUser,), settings)


def _init_error(cls) -> str:
    import types

    from llmload.plugin.options.option_checks import ConfigError
    from llmload.plugin.run.config import build_config

    env = types.SimpleNamespace(parsed_options=None, user_classes=[cls], host="http://127.0.0.1:9", shape_class=None)
    with pytest.raises(ConfigError) as e:
        build_config(env, require_host=True)
    return str(e.value)


def _folder(tmp_path, **files: bytes) -> str:
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    return str(tmp_path)


@pytest.mark.parametrize(("settings", "message"), [
    ({"response_format": "srt"}, "TalkUser.response_format 'srt': expected one of json"),
    ({"response_format": "verbose_json"}, "TalkUser: response_format verbose_json cannot be streamed"),
    ({"clips": 0}, "TalkUser.clips 0: expected a whole number >= 1"),
    ({"audio_seconds": "ten"}, "TalkUser.audio_seconds: expected N or \"LOW-HIGH\", got 'ten'"),
    ({"audio_seconds": "5-1000"}, "TalkUser.audio_seconds: a draw can be 1000 s; a synthetic clip is at most 819.1 s"),
    ({"audio_seconds": {"dist": "lognormal", "median": 20, "sigma": 1}},
     "TalkUser.audio_seconds: a lognormal draw has no upper bound; a synthetic clip is at most 819.1 s"),
    ({"audio_dir": "no-such-folder"}, "TalkUser.audio_dir 'no-such-folder': not a folder"),
    ({"audio_dir": "EMPTY"}, "no audio file in it"),
    ({"audio_dir": "BAD_WAV"}, "TalkUser.audio_dir: "),
    ({"audio_dir": "MP3"}, "TalkUser.audio_dir: "),
    ({"audio_dir": "HUGE"}, "over the 25 MiB a transcription server takes; split it"),
])
def test_bad_audio_settings_stop_the_run_at_init_with_one_line(tmp_path, settings, message):
    folders = {"EMPTY": {}, "BAD_WAV": {"a.wav": b"RIFF0000WAVEnope"}, "MP3": {"talk.mp3": b"ID3" + bytes(64)},
               "HUGE": {"big_10s.mp3": bytes((25 << 20) + 1)}}
    if settings.get("audio_dir") in folders:
        settings = {"audio_dir": _folder(tmp_path, **folders[settings["audio_dir"]])}
    text = _init_error(_audio_class(**settings))
    assert message in text and "\n" not in text, text


def test_good_audio_settings_pass_the_init_check_and_a_synthetic_clip_fits_the_upload_limit(tmp_path):
    from llmload.workload.endpoints.audio import MAX_CLIP_SECONDS, MAX_FILE_BYTES

    _audio_class(audio_seconds={"dist": "lognormal", "median": 20, "sigma": 1, "max": 600}).check_settings()
    _audio_class(audio_dir=_folder(tmp_path, **{"talk_2.5s.mp3": b"ID3" + bytes(64)})).check_settings()
    assert len(synth_wav(MAX_CLIP_SECONDS, 1)) <= MAX_FILE_BYTES
    with pytest.raises(ValueError, match="at most 819.1 s"):
        synthetic_clips(parse_distribution(900, "audio_seconds", integer=False), 1, 1)


def test_a_new_run_seed_drops_the_clip_pools_of_the_old_one():
    from llmload.workload.endpoints import audio

    clips = synthetic_clips(parse_distribution(1, "audio_seconds", integer=False), 1, seed=3)
    fields = transcription_fields("m", stream=True)
    first = clip_pool(("seeds", 1), lambda: clips, fields, 30)
    assert clip_pool(("seeds", 1), lambda: clips, fields, 30) is first
    clip_pool(("seeds", 1), lambda: clips, fields, 31)  # the web UI's next test
    assert {k[2] for k in audio._POOLS} == {31}  # one pool per seed would grow with every test
