"""Audio transcription (``POST /v1/audio/transcriptions``) on the wire, pure: the multipart/form-data
body (OpenAI's fields, as vLLM's ``TranscriptionRequest`` reads them from the form), an audio file's
length from its own header, and what a whole (not streamed) answer must hold to count.

A streamed answer is vLLM's chat-like ``transcription.chunk`` events (``choices[0].delta.content``,
``finish_reason`` on the last text chunk, ``usage`` in a final chunk with no choices when
``stream_include_usage`` is set, then ``data: [DONE]``): :mod:`llmload.wire.chunks` reads them as it
reads chat chunks, so TTFT, truncation and stream errors mean what they mean for chat.

Usage::

    fields = transcription_fields("whisper-large-v3", language="en", response_format="json", stream=True)
    body = multipart_body(fields, "clip.wav", wav_bytes, "audio/wav", boundary="llmload-5f1c")
    content_type = multipart_content_type("llmload-5f1c")
    audio_seconds("clip.wav", wav_bytes)        # 12.5: from the WAV header
    check = check_transcription(answer_bytes, "json")
    check.error, check.empty                    # None, False: a transcript came back
"""

from __future__ import annotations

import io
import json
import re
import wave
from dataclasses import dataclass

RESPONSE_FORMATS = ("json", "verbose_json", "text")  # vLLM serves these three (srt and vtt: 400)
# File suffixes the OpenAI API (and vLLM, through librosa) takes, and the part's Content-Type for each.
AUDIO_TYPES = {".wav": "audio/wav", ".flac": "audio/flac", ".mp3": "audio/mpeg", ".mpga": "audio/mpeg",
               ".mpeg": "audio/mpeg", ".mp4": "audio/mp4", ".m4a": "audio/mp4", ".ogg": "audio/ogg",
               ".oga": "audio/ogg", ".opus": "audio/ogg", ".webm": "audio/webm"}
# A file whose header llmload cannot read (mp3, ogg, ...) gives its length in its name: talk_12.5s.mp3
_SECONDS_IN_NAME = re.compile(r"_(\d+(?:\.\d+)?)s\.[A-Za-z0-9]+$")
MAX_TEXT_BODY = 64 << 20  # the transport's whole-body cap applies first


def transcription_fields(model: str, language: str | None = None, response_format: str = "json",
                         temperature: float | None = 0.0, stream: bool = False,
                         include_usage: bool = True) -> list[tuple[str, str]]:
    """The form's text fields, in OpenAI's documented order. ``include_usage`` (with ``stream``): vLLM's
    flattened ``stream_include_usage``, so the last chunk carries the token counts."""
    fields = [("model", model)]
    if language:
        fields.append(("language", language))
    fields.append(("response_format", response_format))
    if temperature is not None:
        fields.append(("temperature", f"{temperature:g}"))
    if stream:
        fields.append(("stream", "true"))
        if include_usage:
            fields.append(("stream_include_usage", "true"))
    return fields


def multipart_content_type(boundary: str) -> str:
    return f"multipart/form-data; boundary={boundary}"


def multipart_body(fields: list[tuple[str, str]], filename: str, audio: bytes, content_type: str,
                   boundary: str) -> bytes:
    """RFC 7578 form data: the file part first (as the openai SDK sends it), then each text field."""
    if boundary.encode() in audio:
        raise ValueError(f"the multipart boundary {boundary!r} occurs inside {filename}: pick another")
    safe_name = filename.replace('"', "_").replace("\r", "_").replace("\n", "_")
    dash = b"--" + boundary.encode()
    parts = [dash + b'\r\nContent-Disposition: form-data; name="file"; filename="' + safe_name.encode()
             + b'"\r\nContent-Type: ' + content_type.encode() + b"\r\n\r\n" + audio + b"\r\n"]
    for name, value in fields:
        parts.append(dash + f'\r\nContent-Disposition: form-data; name="{name}"\r\n\r\n{value}\r\n'.encode())
    return b"".join(parts) + dash + b"--\r\n"


def audio_seconds(name: str, data: bytes) -> float:
    """The length of an audio file in seconds: a WAV's from its header (frames / rate), a FLAC's from
    its STREAMINFO block (total samples / rate), any other format's from its name (``talk_12.5s.mp3``).
    Raises ValueError naming the file and the fix."""
    if data[:4] == b"RIFF" and data[8:12] == b"WAVE":
        try:
            with wave.open(io.BytesIO(data)) as w:
                rate, frames = w.getframerate(), w.getnframes()
        except (wave.Error, EOFError) as e:
            raise ValueError(f"{name}: not a WAV file llmload can read ({e}); write 16-bit PCM WAV") from None
        if rate <= 0:
            raise ValueError(f"{name}: the WAV header gives a sample rate of {rate}")
        return frames / rate
    if data[:4] == b"fLaC":
        # The first metadata block is STREAMINFO (34 bytes): 20 bits of sample rate, 3 of channels,
        # 5 of bits per sample and 36 of total samples, from byte 10 of the block on.
        if len(data) < 42 or data[4] & 0x7F != 0:
            raise ValueError(f"{name}: a FLAC file without its STREAMINFO block")
        bits = int.from_bytes(data[18:26], "big")
        rate, total = bits >> 44, bits & ((1 << 36) - 1)
        if rate <= 0 or total <= 0:
            raise ValueError(f"{name}: its FLAC header does not give the length (rate {rate}, {total} samples); "
                             "re-encode it with the length, or convert it to WAV")
        return total / rate
    m = _SECONDS_IN_NAME.search(name)
    if m is None:
        raise ValueError(f"{name}: llmload reads the length of WAV and FLAC files from their headers; for any "
                         "other format put it in the name, e.g. talk_12.5s.mp3, or convert the file to WAV")
    seconds = float(m.group(1))
    if seconds <= 0:
        raise ValueError(f"{name}: the length in its name must be more than 0 seconds")
    return seconds


@dataclass(frozen=True, slots=True)
class TranscriptionCheck:
    """What a whole answer said: ``error`` (None when it holds a transcript), ``empty`` (the transcript
    is empty: no output, as an empty chat stream) and its length in characters."""

    error: str | None
    empty: bool = False
    chars: int = 0


def check_transcription(body: bytes, response_format: str) -> TranscriptionCheck:
    """A whole answer held to ``response_format``: ``json`` and ``verbose_json`` are an object with a
    ``text`` string (vLLM sends JSON for ``text`` too); ``text`` is the transcript itself as plain
    text, or that same JSON object."""
    stripped = body.strip()
    if response_format == "text" and stripped[:1] != b"{":
        try:
            text = stripped.decode("utf-8")
        except UnicodeDecodeError:
            return TranscriptionCheck("response_format text: the body is not UTF-8 text")
        return TranscriptionCheck(None, empty=not text, chars=len(text))
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        return TranscriptionCheck(f"invalid JSON in the transcription: {e.__class__.__name__}: {e}"[:200])
    if not isinstance(obj, dict):
        return TranscriptionCheck("the transcription is not a JSON object")
    if "error" in obj and "text" not in obj:
        err = obj["error"]
        message = err.get("message") if isinstance(err, dict) else err
        return TranscriptionCheck(f"error object in a 2xx answer: {message}"[:300])
    text = obj.get("text")
    if not isinstance(text, str):
        got = "no text" if text is None else f"text of type {type(text).__name__}"
        return TranscriptionCheck(f"response_format {response_format}: expected a JSON object with a text "
                                  f"string, got {got}")
    if response_format == "verbose_json" and "segments" in obj and not isinstance(obj["segments"], list | None):
        return TranscriptionCheck("response_format verbose_json: segments is not a list")
    return TranscriptionCheck(None, empty=not text.strip(), chars=len(text))
