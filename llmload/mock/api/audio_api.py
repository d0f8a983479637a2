"""``POST /v1/audio/transcriptions`` as the mock speaks it, pure: the multipart/form-data body parsed by
hand (bounded: at most ``MAX_PARTS`` parts, headers of a part ``MAX_PART_HEAD`` bytes, a text field
``MAX_FIELD`` bytes; the request itself is bounded by the HTTP parser), the audio's length from its
header (:func:`llmload.wire.audio.audio_seconds`), and the answers in vLLM's shapes
(``vllm/entrypoints/openai/speech_to_text/``): a stream of ``transcription.chunk`` events (the text
in ``choices[0].delta.content``, ``finish_reason`` on the last, then a usage chunk with no choices
when ``stream_include_usage`` is set, then ``data: [DONE]``), or one JSON body (``{"text", "usage":
{"type": "duration", "seconds"}}``; ``verbose_json`` adds ``language``, ``duration``, ``segments``).

The transcript is ``WORDS_PER_SECOND`` words per second of audio (150 words a minute, a speaker's
pace); the prompt is ``PROMPT_TOKENS_PER_SECOND`` tokens per second (Whisper's encoder: 1,500 frames
per 30 s).

Usage::

    ask = parse_transcription(body, headers["content-type"], "mock")
    fmt = TranscriptionFormatter("trsc-1", ask.model, created=1796046422)
    frames = [fmt.chunk(" hello"), fmt.chunk(" world", "stop"), fmt.usage(ask.prompt_tokens, 2), fmt.DONE]
    answer = whole_answer(ask, "hello world")
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass

from llmload.mock.api.openai_api import BadRequest
from llmload.wire.audio import RESPONSE_FORMATS, audio_seconds

MAX_PARTS = 64
MAX_PART_HEAD = 4096
MAX_FIELD = 4096
WORDS_PER_SECOND = 2.5
PROMPT_TOKENS_PER_SECOND = 50
_DISPOSITION_PARAM = re.compile(r'\b(name|filename)="([^"]*)"', re.IGNORECASE)
_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off", "")
WORDS = ("so", "the", "plan", "for", "today", "is", "simple", "we", "load", "test", "every", "endpoint",
         "and", "then", "we", "price", "an", "hour", "of", "audio")


def parse_multipart(body: bytes, content_type: str) -> dict[str, tuple[str | None, bytes]]:
    """The parts of a form: name → (filename or None, content). BadRequest on anything malformed."""
    kind, _, params = content_type.partition(";")
    if kind.strip().lower() != "multipart/form-data":
        raise BadRequest(f"Content-Type: expected multipart/form-data (an audio upload), got {kind.strip()!r}")
    boundary = ""
    for param in params.split(";"):
        key, _, value = param.strip().partition("=")
        if key.strip().lower() == "boundary":
            boundary = value.strip().strip('"')
    if not 1 <= len(boundary) <= 70:
        raise BadRequest("Content-Type: multipart/form-data needs a boundary of 1 to 70 characters")
    dash = b"--" + boundary.encode("latin-1")
    if not body.startswith(dash):
        raise BadRequest("multipart body: it does not start with its boundary")
    parts: dict[str, tuple[str | None, bytes]] = {}
    pos = len(dash)
    while not body.startswith(b"--", pos):  # "--boundary--" closes the form
        if not body.startswith(b"\r\n", pos):
            raise BadRequest("multipart body: a boundary not followed by CRLF")
        head_end = body.find(b"\r\n\r\n", pos + 2, pos + 2 + MAX_PART_HEAD)
        if head_end < 0:
            raise BadRequest(f"multipart body: a part's headers do not end within {MAX_PART_HEAD} bytes")
        end = body.find(b"\r\n" + dash, head_end + 4)
        if end < 0:
            raise BadRequest("multipart body: cut off (no closing boundary)")
        name, filename = _disposition(body[pos + 2:head_end].decode("latin-1"))
        if len(parts) >= MAX_PARTS:
            raise BadRequest(f"multipart body: more than {MAX_PARTS} parts")
        parts[name] = (filename, body[head_end + 4:end])
        pos = end + 2 + len(dash)
    return parts


def _disposition(head: str) -> tuple[str, str | None]:
    for line in head.split("\r\n"):
        key, _, value = line.partition(":")
        if key.strip().lower() == "content-disposition":
            found = {k.lower(): v for k, v in _DISPOSITION_PARAM.findall(value)}
            if "name" in found:
                return found["name"], found.get("filename")
    raise BadRequest("multipart body: a part without Content-Disposition: form-data; name=...")


@dataclass(frozen=True, slots=True)
class TranscriptionAsk:
    model: str
    audio_seconds: float
    response_format: str
    language: str | None
    stream: bool
    include_usage: bool

    @property
    def words(self) -> int:
        return max(1, math.ceil(self.audio_seconds * WORDS_PER_SECOND))

    @property
    def prompt_tokens(self) -> int:
        return max(1, math.ceil(self.audio_seconds * PROMPT_TOKENS_PER_SECOND))


def _field(parts: dict[str, tuple[str | None, bytes]], name: str) -> str | None:
    if name not in parts:
        return None
    value = parts[name][1]
    if len(value) > MAX_FIELD:
        raise BadRequest(f"{name}: longer than {MAX_FIELD} bytes")
    try:
        return value.decode("utf-8").strip()
    except UnicodeDecodeError:
        raise BadRequest(f"{name}: not UTF-8 text") from None


def _flag(parts: dict[str, tuple[str | None, bytes]], name: str) -> bool:
    value = (_field(parts, name) or "").lower()
    if value not in _TRUE + _FALSE:
        raise BadRequest(f"{name}: expected true or false, got {value[:40]!r}")
    return value in _TRUE


def parse_transcription(body: bytes, content_type: str, default_model: str) -> TranscriptionAsk:
    parts = parse_multipart(body, content_type)
    if "file" not in parts or parts["file"][0] is None:
        raise BadRequest("file: expected an audio file part (Content-Disposition: form-data; name=\"file\"; "
                         "filename=...)")
    filename, audio = parts["file"]
    try:
        seconds = audio_seconds(filename or "audio", audio)
    except ValueError as e:
        raise BadRequest(f"file: {e}") from None
    fmt = _field(parts, "response_format") or "json"
    if fmt not in RESPONSE_FORMATS:
        raise BadRequest(f"Currently only support response_format: `text`, `json` or `verbose_json`, got {fmt!r}")
    stream = _flag(parts, "stream")
    if stream and fmt == "verbose_json":
        raise BadRequest("verbose_json format doesn't support streaming case")
    include_usage = _flag(parts, "stream_include_usage")
    if include_usage and not stream:
        raise BadRequest("Stream options can only be defined when `stream=True`.")
    temperature = _field(parts, "temperature")
    if temperature:
        try:
            float(temperature)
        except ValueError:
            raise BadRequest(f"temperature: expected a number, got {temperature[:40]!r}") from None
    return TranscriptionAsk(model=_field(parts, "model") or default_model, audio_seconds=seconds,
                            response_format=fmt, language=_field(parts, "language") or None, stream=stream,
                            include_usage=include_usage)


def transcript_words(n: int) -> list[str]:
    """The mock's transcript: ``n`` words, each with its leading space (one per streamed chunk)."""
    return [" " + WORDS[i % len(WORDS)] for i in range(n)]


class TranscriptionFormatter:
    """The SSE events of one streamed transcription (no HTTP framing): vLLM's ``model_dump_json(
    exclude_unset=True)``, so a text chunk has no ``finish_reason`` key and the last one has it and
    ``stop_reason``."""

    DONE = b"data: [DONE]\n\n"

    def __init__(self, request_id: str, model: str, created: int) -> None:
        self.head = {"id": request_id, "object": "transcription.chunk", "created": created, "model": model}

    def _event(self, obj: dict) -> bytes:
        return b"data: " + json.dumps(obj, ensure_ascii=False, separators=(",", ":")).encode() + b"\n\n"

    def chunk(self, text: str, finish_reason: str | None = None) -> bytes:
        choice: dict = {"delta": {"content": text}}
        if finish_reason is not None:
            choice.update(finish_reason=finish_reason, stop_reason=None)
        return self._event({**self.head, "choices": [choice]})

    def usage(self, prompt: int, completion: int) -> bytes:
        return self._event({**self.head, "choices": [], "usage": {"prompt_tokens": prompt,
                                                                  "total_tokens": prompt + completion,
                                                                  "completion_tokens": completion}})


def whole_answer(ask: TranscriptionAsk, text: str, missing_text: bool = False) -> bytes:
    """The JSON answer (vLLM sends JSON for ``text`` too); ``missing_text`` (the fault) leaves ``text`` out."""
    usage = {"type": "duration", "seconds": math.ceil(ask.audio_seconds)}
    if ask.response_format == "verbose_json":
        obj: dict = {"duration": str(ask.audio_seconds), "language": ask.language or "en", "text": text,
                     "segments": [], "words": None}
    else:
        obj = {"text": text, "usage": usage}
    if missing_text:
        obj.pop("text")
    return json.dumps(obj, ensure_ascii=False).encode()
