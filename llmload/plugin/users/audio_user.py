"""``LLMAudioUser``: audio clips to ``/v1/audio/transcriptions`` (multipart/form-data: file, model,
language, response_format, temperature, stream), streamed where the server streams (vLLM does).

A streamed answer is read as a chat stream (TTFT: t0 to the first text chunk; E2E: to its end;
a stream that ends without a finish reason or ``[DONE]`` is ``truncated``, an error event
``stream_error``); a whole answer is held to its ``response_format`` (a ``text`` string in the JSON;
the body itself for ``text``): without one it is a ``protocol_error``, an empty transcript ``empty``.
Every row carries the clip's length in ``audio_seconds``, so the report gives RTFx (audio seconds
per wall-clock second) and the price of an audio hour.

Usage::

    class Transcribe(LLMAudioUser):
        audio_seconds = "5-30"       # synthetic clips: N, "LOW-HIGH" or a distribution mapping (seconds)
        audio_dir = None             # or a folder of wav/flac/mp3/... files, sent as they are
        language = "en"
        response_format = "json"     # json, verbose_json or text
        stream = True                # vLLM streams transcription.chunk events
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from llmload.metrics import record as R
from llmload.plugin.users.llm_user import LLMUser
from llmload.transport.fast import FastTransport
from llmload.wire.audio import RESPONSE_FORMATS, check_transcription, transcription_fields
from llmload.wire.endpoints import endpoint
from llmload.workload.distributions import SpecError, parse_distribution
from llmload.workload.endpoints.audio import (
    AudioClip,
    AudioWorkload,
    check_clip_lengths,
    clip_pool,
    folder_clips,
    synthetic_clips,
)


class LLMAudioUser(LLMUser):
    """Transcribes audio clips (see the module docstring)."""

    abstract = True
    endpoint = "audio"

    audio_seconds: Any = "5-30"
    """Each synthetic clip's length in seconds: ``N``, ``"LOW-HIGH"`` or a distribution mapping."""

    audio_dir: str | None = None
    """A folder of audio files to send instead (WAV, FLAC: length from the header; others: ``_12.5s`` in the name)."""

    clips: int = 8
    """How many synthetic clips the pool holds (built once per process; every user picks from it)."""

    language: str | None = "en"
    """ISO-639-1 language of the audio; None: the server detects it."""

    response_format: str = "json"
    """``json``, ``verbose_json`` (not streamed) or ``text``."""

    temperature: float | None = 0.0
    """Sampling temperature; None: the server's default."""

    stream: bool = True
    """Ask for a stream (vLLM's ``transcription.chunk`` events); False: one whole answer."""

    include_usage: bool = True
    """With ``stream``: vLLM's ``stream_include_usage``, so the last chunk carries the token counts."""

    @classmethod
    def check_settings(cls) -> None:
        """Every setting checked once, at init (``plugin.config`` turns the ValueError into the one line
        that stops the run): the formats, ``clips``, ``audio_seconds`` and every file of ``audio_dir``."""
        _key, make = cls.clip_source(0)
        if cls.audio_dir:  # every file read once here: its size, its header or the length in its name
            try:
                make()
            except (OSError, ValueError) as e:
                text = str(e)
                raise ValueError(f"{cls.__name__}.{text}" if text.startswith("audio_dir ")
                                 else f"{cls.__name__}.audio_dir: {text}") from None

    @classmethod
    def clip_source(cls, run_seed: int) -> tuple[tuple, Callable[[], list[AudioClip]]]:
        """The pool's key and the function that makes its clips; ValueError naming the setting and the fix."""
        name = cls.__name__
        if cls.response_format not in RESPONSE_FORMATS:
            raise ValueError(f"{name}.response_format {cls.response_format!r}: expected one of "
                             f"{', '.join(RESPONSE_FORMATS)}")
        if cls.stream and cls.response_format == "verbose_json":
            raise ValueError(f"{name}: response_format verbose_json cannot be streamed (vLLM answers 400); set "
                             "stream = False")
        if isinstance(cls.clips, bool) or not isinstance(cls.clips, int) or cls.clips < 1:
            raise ValueError(f"{name}.clips {cls.clips!r}: expected a whole number >= 1")
        if cls.audio_dir:
            folder = str(cls.audio_dir)
            return ("dir", folder), lambda: folder_clips(folder)
        what = f"{name}.audio_seconds"
        try:
            lengths = parse_distribution(cls.audio_seconds, what, integer=False, minimum=0.1)
        except SpecError as e:
            raise ValueError(str(e)) from None
        check_clip_lengths(lengths, what)
        count = cls.clips
        return ("synthetic", repr(cls.audio_seconds), count), lambda: synthetic_clips(lengths, count, run_seed)

    def on_start(self) -> None:
        plugin = self.plugin
        cls = type(self)
        run_seed = self.run_seed()
        source, make = cls.clip_source(run_seed)  # checked at init (check_settings): no error here
        client = plugin.client_for(self.host, plugin.config.client)
        model = plugin.option("model") or self.model or plugin.resolve_model(self.host, client)
        fields = transcription_fields(model, self.language, self.response_format, self.temperature, self.stream,
                                      self.include_usage)
        clips, boundary, bodies = clip_pool(source, make, fields, run_seed)
        setup = plugin.setup_for(cls)
        self.scenario_name = setup.scenario_name if setup.scenario_name != "chat" else "audio"
        self.audio = AudioWorkload(self.scenario_name, clips, fields, self.seed(), bodies, boundary)
        self.transport = FastTransport(self.host, endpoint(self.endpoint).path, client,
                                       accept="text/event-stream" if self.stream else "application/json",
                                       content_type=self.audio.content_type)
        self._loop = self.transcribe_once
        try:
            self.transport.connect()
        except OSError:
            pass  # recorded as connect_error by the first request

    def transcribe_once(self) -> None:
        """One clip, sent and recorded: LLMUser's task runs it (its ``_loop``)."""
        request = self.audio.next_request()
        runner = self.environment.runner
        meta = R.RequestMeta(request_id=self.plugin.next_request_id(), start_time=0.0, scenario=request.scenario,
                             users=runner.user_count if runner is not None else 0, worker=self.plugin.worker_index,
                             audio_seconds=request.audio_seconds)
        if self.stream:
            rec = self.transport.stream(request.body, meta, on_cancel=self.plugin.record)
        else:
            fmt = self.response_format

            def check(body: bytes, meta: R.RequestMeta, latency_ms: float, code: int) -> R.RequestRecord:
                result = check_transcription(body, fmt)
                if result.error is None and result.empty:
                    return R.RequestRecord(meta=meta, status=R.EMPTY, http_status=code, e2e_ms=latency_ms,
                                           completion_tokens=0, error="a transcription with no text")
                return R.whole_body_record(meta, latency_ms, code, result.error, None)

            rec = self.transport.stream(request.body, meta, on_cancel=self.plugin.record, check_body=check)
        self.plugin.record(rec)
