"""The transcription workload: a pool of audio clips, synthesised here (16 kHz mono 16-bit WAV, each
clip's length drawn from a distribution in seconds) or read from a folder, and the multipart body of
every clip built once, so a request only picks one (nothing is encoded per request, nothing is
downloaded). Pure and seeded, but the folder's reading.

The pool is one per process and spec (``clip_pool``): every user of a process shares its bytes, and
every process of a run draws the same clips from the run's seed; each user picks from it with its
own seed.

The synthetic signal is speech-shaped, not speech: a voiced tone of 90-250 Hz with four harmonics,
its loudness moving at a syllable rate (3-6 Hz), and a little noise. A real model may transcribe it
to nothing or to a few invented words; it costs a server what speech of that length costs (the
encoder sees the whole clip). Use a folder of recordings to measure a real model's output.

Usage::

    clips = synthetic_clips(parse_distribution("5-30", "audio_seconds", integer=False), count=8, seed=1)
    clips = folder_clips("audio/")              # *.wav, *.flac, ... sorted by name
    w = AudioWorkload("audio", clips, transcription_fields("whisper-1", stream=True), seed=7)
    req = w.next_request()                      # AudioRequest: body, content_type, audio_seconds
"""

from __future__ import annotations

import io
import math
import random
import wave
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from llmload.wire.audio import AUDIO_TYPES, audio_seconds, multipart_body, multipart_content_type
from llmload.workload.distributions import Distribution

SAMPLE_RATE = 16_000  # what Whisper-style encoders resample to anyway
MAX_FILE_BYTES = 25 << 20  # OpenAI's upload limit (and vLLM's default VLLM_MAX_AUDIO_CLIP_FILESIZE_MB)
WAV_HEADER = 44
MAX_CLIP_SECONDS = math.floor((MAX_FILE_BYTES - WAV_HEADER) / (2 * SAMPLE_RATE) * 10) / 10  # 819.1 s: 25 MiB of WAV


@dataclass(frozen=True, slots=True)
class AudioClip:
    """One audio file to send: its name, bytes, Content-Type and length in seconds."""

    name: str
    data: bytes
    content_type: str
    seconds: float


@dataclass(frozen=True, slots=True)
class AudioRequest:
    scenario: str
    body: bytes
    audio_seconds: float
    clip: str


def synth_wav(seconds: float, seed: int) -> bytes:
    """A deterministic speech-shaped WAV of ``seconds`` (see the module docstring)."""
    n = max(1, round(seconds * SAMPLE_RATE))
    rng = np.random.default_rng(seed)
    t = np.arange(n, dtype=np.float64) / SAMPLE_RATE
    f0 = rng.uniform(90.0, 250.0)
    voiced = sum(np.sin(2 * np.pi * f0 * k * t + rng.uniform(0, 2 * np.pi)) / k for k in range(1, 5))
    syllables = 0.5 * (1.0 + np.sin(2 * np.pi * rng.uniform(3.0, 6.0) * t + rng.uniform(0, 2 * np.pi)))
    signal = 0.25 * voiced * syllables + 0.01 * rng.standard_normal(n)
    pcm = np.clip(signal * 32767.0, -32768, 32767).astype("<i2")
    out = io.BytesIO()
    with wave.open(out, "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(SAMPLE_RATE)
        w.writeframes(pcm.tobytes())
    return out.getvalue()


def check_clip_lengths(lengths: Distribution, what: str) -> None:
    """Raise ValueError naming ``what`` when a draw of ``lengths`` can make a synthetic clip over 25 MiB."""
    top = lengths.top
    if top <= MAX_CLIP_SECONDS:
        return
    longest = f"a draw can be {top:g} s" if math.isfinite(top) else f"a {lengths.kind} draw has no upper bound"
    raise ValueError(f"{what}: {longest}; a synthetic clip is at most {MAX_CLIP_SECONDS:g} s (16 kHz 16-bit WAV: "
                     f"{MAX_FILE_BYTES >> 20} MiB, the upload limit of vLLM and OpenAI): ask for at most that "
                     f"(a normal or lognormal: max: {MAX_CLIP_SECONDS:g})")


def synthetic_clips(lengths: Distribution, count: int, seed: int) -> list[AudioClip]:
    """``count`` clips, each of a length drawn from ``lengths`` (seconds, 0.1 s to ``MAX_CLIP_SECONDS``;
    ValueError, from :func:`check_clip_lengths`, when a draw could be longer)."""
    check_clip_lengths(lengths, "audio_seconds")
    rng = random.Random(seed)
    clips = []
    for i in range(count):
        seconds = round(max(float(lengths.sample(rng)), 0.1), 3)
        data = synth_wav(seconds, rng.getrandbits(32))
        name = f"llmload-{i}.wav"
        clips.append(AudioClip(name, data, "audio/wav", audio_seconds(name, data)))
    return clips


def folder_clips(folder: str | Path) -> list[AudioClip]:
    """Every audio file directly in ``folder`` (by suffix: wav, flac, mp3, m4a, ogg, webm, ...), sorted by
    name, each with its length (:func:`llmload.wire.audio.audio_seconds`). Raises ValueError naming
    the folder or the file and the fix."""
    root = Path(folder)
    if not root.is_dir():
        raise ValueError(f"audio_dir {str(folder)!r}: not a folder (expected a folder of audio files, or None for "
                         "synthetic clips)")
    files = sorted(p for p in root.iterdir() if p.is_file() and p.suffix.lower() in AUDIO_TYPES)
    if not files:
        raise ValueError(f"audio_dir {str(folder)!r}: no audio file in it (expected "
                         f"{', '.join(sorted(AUDIO_TYPES))})")
    clips = []
    for p in files:
        size = p.stat().st_size
        if size > MAX_FILE_BYTES:
            raise ValueError(f"{p}: {size / 2**20:.1f} MiB, over the {MAX_FILE_BYTES >> 20} MiB a transcription "
                             "server takes; split it")
        data = p.read_bytes()
        clips.append(AudioClip(p.name, data, AUDIO_TYPES[p.suffix.lower()], audio_seconds(str(p), data)))
    return clips


def boundary_for(clips: list[AudioClip], seed: int) -> str:
    """A multipart boundary that occurs in none of the clips."""
    rng = random.Random(seed)
    while True:
        boundary = f"llmload-{rng.getrandbits(96):024x}"
        if not any(boundary.encode() in c.data for c in clips):
            return boundary


class AudioWorkload:
    """Picks a clip per request (uniformly, seeded) and hands out its body, built once per clip."""

    def __init__(self, scenario: str, clips: list[AudioClip], fields: list[tuple[str, str]], seed: int,
                 bodies: list[bytes] | None = None, boundary: str | None = None) -> None:
        if not clips:
            raise ValueError("an audio workload needs at least one clip")
        self.scenario = scenario
        self.clips = clips
        self.boundary = boundary or boundary_for(clips, seed)
        self.content_type = multipart_content_type(self.boundary)
        self.bodies = bodies if bodies is not None else [
            multipart_body(fields, c.name, c.data, c.content_type, self.boundary) for c in clips]
        self.rng = random.Random(seed)

    def next_request(self) -> AudioRequest:
        i = self.rng.randrange(len(self.clips))
        clip = self.clips[i]
        return AudioRequest(self.scenario, self.bodies[i], clip.seconds, clip.name)


_POOLS: dict[tuple, tuple[list[AudioClip], str, list[bytes]]] = {}


def clip_pool(key: tuple, make_clips, fields: list[tuple[str, str]], seed: int) -> tuple[list[AudioClip], str,
                                                                                          list[bytes]]:
    """The process's one pool for ``key`` (the clips' source and the form's fields) and run ``seed``: its
    clips, their boundary and bodies, made by ``make_clips()`` the first time. Users share it: one copy of
    the bytes. A new seed drops the pools of the others."""
    full_key = (key, tuple(fields), seed)
    for stale in [k for k in _POOLS if k[2] != seed]:  # a new run seed (the web UI's next test): never used again
        del _POOLS[stale]
    pool = _POOLS.get(full_key)
    if pool is None:
        clips = make_clips()
        boundary = boundary_for(clips, seed)
        bodies = [multipart_body(fields, c.name, c.data, c.content_type, boundary) for c in clips]
        pool = _POOLS[full_key] = (clips, boundary, bodies)
    return pool
