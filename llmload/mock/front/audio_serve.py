"""The mock's ``/v1/audio/transcriptions``: one upload parsed (:mod:`.audio_api`), its audio queued for
a step of the encoder, then the transcript streamed or answered whole, and the request logged as
the other endpoints are (``audio_seconds``: the clip's length; ``tokens_sent``: the words).

The cost is per second of audio: one queue, each step takes the queue's head up to
``AUDIO_BATCH_SECONDS`` of audio and lasts its audio seconds / ``--audio-rtfx`` (the server's real-time
factor: under load it transcribes at most that many audio seconds per second, whatever the
concurrency). When a clip's step ends its first words leave (TTFT: queueing + encoding); every
further word follows ``--audio-itl-ms`` later; a whole answer leaves after the last word's time.

Faults (``X-Mock-Fault`` or ``--fault``): ``429``/``500``/``503``; ``slow_first:S`` (S more seconds
before the first word); ``disconnect:K`` (hang up after K words); ``missing_text`` (a whole answer
without ``text``; a stream whose chunks carry no text); ``no_final_chunk`` (a stream that ends
without the finish reason, the usage and ``[DONE]``; a whole answer cut inside its JSON).

Usage::

    HANDLER.serve(server, sock, "/v1/audio/transcriptions", headers, body, rx_mono)   # the server's route
"""

from __future__ import annotations

from time import perf_counter
from typing import Any

import gevent

from llmload.mock.api.audio_api import TranscriptionFormatter, parse_transcription, transcript_words, whole_answer
from llmload.mock.api.embeddings_api import EmbeddingBatcher
from llmload.mock.api.handler import BodyApi
from llmload.mock.front.intake import admit

AUDIO_BATCH_SECONDS = 600  # audio one encoder step takes from the queue at most
STREAM_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
               b"transfer-encoding: chunked\r\n\r\n")


def _frame(data: bytes) -> bytes:
    return b"%x\r\n%b\r\n" % (len(data), data)


def serve_transcription(server: Any, sock: Any, path: str, headers: dict[str, str], body: bytes,
                        rx_mono: float) -> bool:
    """One upload, transcribed; True: the connection goes on."""
    c = server.config
    admitted = admit(server, sock, headers, body, rx_mono,
                     lambda b: parse_transcription(b, headers.get("content-type", ""), c.model),
                     lambda rid, arrival_unix, fault, ask: _log(server, rid, rx_mono, arrival_unix, None, None, 0,
                                                                f"fault:{fault.status}", fault, ask))
    if admitted is None:
        return True
    rid, arrival_unix, fault, ask = admitted
    if server.transcriber is None:  # weighs audio in milliseconds: 1/rtfx ms of a step per ms of audio
        server.transcriber = EmbeddingBatcher(0.0, 1.0 / c.audio_rtfx, AUDIO_BATCH_SECONDS * 1000)
    if fault is not None and fault.kind == "slow_first":
        gevent.sleep(fault.seconds)
    server.transcriber.run(max(1, round(ask.audio_seconds * 1000)))
    words = transcript_words(ask.words)
    kind = fault.kind if fault is not None else ""
    faults = ("missing_text", "no_final_chunk", "disconnect") if ask.stream else ("missing_text", "no_final_chunk")
    outcome = f"fault:{kind}" if kind in faults else "completed"
    itl_s = c.audio_itl_ms / 1000.0
    if not ask.stream:
        gevent.sleep(itl_s * (len(words) - 1))  # the decoder's time for the words after the first
        answer = whole_answer(ask, "".join(words).strip(), missing_text=kind == "missing_text")
        if kind == "no_final_chunk":
            answer = answer[:len(answer) // 2]
        ready = perf_counter()
        server._send(sock, 200, answer)
        _log(server, rid, rx_mono, arrival_unix, ready, perf_counter(), len(words), outcome, fault, ask)
        return True
    fmt = TranscriptionFormatter(f"transcribe-{rid}", ask.model, int(arrival_unix))
    first = last = None
    sent = 0
    try:
        sock.sendall(STREAM_HEAD)
        for i, word in enumerate(words):
            if i:
                gevent.sleep(itl_s)
            final = i == len(words) - 1 and kind != "no_final_chunk"
            now = perf_counter()
            sock.sendall(_frame(fmt.chunk("" if kind == "missing_text" else word, "stop" if final else None)))
            first = first if first is not None else now
            last = now
            sent = i + 1
            if kind == "disconnect" and sent >= fault.after_tokens:
                sock.shutdown(2)
                _log(server, rid, rx_mono, arrival_unix, first, last, sent, outcome, fault, ask)
                return False
        tail = b""
        if kind != "no_final_chunk":
            if ask.include_usage:
                tail += _frame(fmt.usage(ask.prompt_tokens, len(words)))
            tail += _frame(fmt.DONE)
        sock.sendall(tail + b"0\r\n\r\n")  # the last word's time stays the last token's: stamped before its
        # send, so no client can read it earlier (stamped after this send, a mock descheduled in between
        # put it 1.8 ms after the client's read of the whole stream, beside a busy loop)
    except OSError:
        _log(server, rid, rx_mono, arrival_unix, first, last, sent, "disconnected", fault, ask)
        return False
    _log(server, rid, rx_mono, arrival_unix, first, last, sent, outcome, fault, ask)
    return True


def _count(server: Any, ask: Any, arrival_mono: float, first: float | None, last: float | None, words: int) -> None:
    """vLLM has no metric of its own for transcriptions: they are engine requests, in its token counters
    and latency histograms. The mock counts them there too."""
    s = server.engine.stats
    s.submitted(ask.prompt_tokens, words)
    s.admitted(ask.prompt_tokens, 0.0)
    s.generation_tokens += words
    if first is None or last is None:
        return
    if s.ttft is not None:
        s.ttft.observe(first - arrival_mono)
    s.finished(ask.prompt_tokens, 0, words, last - arrival_mono, (last - first) / (words - 1) if words > 1 else None)


def _log(server: Any, rid: str, arrival_mono: float, arrival_unix: float, first: float | None,
         last: float | None, words: int, outcome: str, fault: Any, ask: Any) -> None:
    server.requests_by_outcome[outcome] = server.requests_by_outcome.get(outcome, 0) + 1
    if not outcome.removeprefix("fault:").isdigit():  # an HTTP error answered at once never ran (as for chat)
        server.engine.stats.finished_as({"completed": "stop", "disconnected": "abort"}.get(outcome, "error"))
    if words:
        _count(server, ask, arrival_mono, first, last, words)
    if server._log is not None:
        server._log.add({"request_id": rid, "arrival_unix": round(arrival_unix, 6), "arrival_mono": arrival_mono,
                         "first_token_mono": first, "last_token_mono": last, "tokens_sent": words,
                         "prompt_tokens": ask.prompt_tokens, "cached_tokens": 0, "outcome": outcome,
                         "fault": fault.spec if fault else None, "image_tokens": 0, "reply": "transcription",
                         "audio_seconds": ask.audio_seconds, "stream": ask.stream})


HANDLER = BodyApi(serve=serve_transcription)
