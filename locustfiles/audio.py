"""Audio transcription: `locust -f locustfiles/audio.py --host http://127.0.0.1:8000`.

Synthetic clips of 5-30 s (16 kHz mono WAV, built once, nothing downloaded) to
`/v1/audio/transcriptions`, streamed (vLLM's `transcription.chunk` events); every row carries its
clip's length, so `llmload report` gives RTFx and, with `--gpu-hourly-usd`, the price of an audio
hour. Set `audio_dir` to send a folder of recordings instead."""

from llmload import LLMAudioUser


class TranscribeUser(LLMAudioUser):
    audio_seconds = "5-30"
    language = "en"
    response_format = "json"
    stream = True
