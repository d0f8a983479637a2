"""The stream the mock serves for one request: the engine's emissions → SSE frames (vLLM's shape)
→ HTTP chunks on the socket, with the injected faults (disconnect, malformed, stream error).
A reply planned as JSON or as a tool call (:mod:`.structured`) streams its ``pieces``, one per
token, instead of words; a tool call as ``delta.tool_calls``, ending in ``finish_reason: tool_calls``.

The mock's driver greenlet calls :meth:`ServedStream.on_emission` for every emission, in order,
and the bytes go straight to the socket (non-blocking); what does not fit waits in ``outbox``
for the connection's own greenlet, woken through ``attention``.

Usage::

    stream = ServedStream(engine, sock, parsed_body, "req-1", fault=None, arrival_mono=t, arrival_unix=u)
    stream.seq = engine.submit(...); stream.seq.user = stream
    stream.on_emission(tokens=1, first=True, finished=False, generated=1)
"""

from __future__ import annotations

import socket
from time import perf_counter
from typing import Any

import gevent.event

from llmload.mock.api import openai_api as api
from llmload.mock.api.messages_api import MessagesFormatter
from llmload.mock.api.responses_api import ResponsesFormatter
from llmload.mock.engine.batching_engine import BatchingEngine
from llmload.mock.engine.engine_base import Sequence
from llmload.mock.engine.fixed_engine import FixedEngine
from llmload.mock.front.faults import Fault
from llmload.net import timestamps as netstamp


class ServedStream:
    """One request being served: formats its tokens and writes them as they come."""

    __slots__ = ("engine", "sock", "raw", "req", "rid", "fmt", "fault", "seq", "outbox", "attention",
                 "done", "gone", "text", "arrival_mono", "arrival_unix", "first_mono", "last_mono",
                 "sent", "finish_reason", "watcher", "outcome", "max_tokens_cap", "token_monos", "pieces", "tool")

    def __init__(self, engine: BatchingEngine | FixedEngine, sock: socket.socket, req: api.ParsedRequest, rid: str,
                 fault: Fault | None, arrival_mono: float, arrival_unix: float) -> None:
        self.engine = engine
        self.sock = sock
        self.raw = sock._sock  # the non-blocking OS socket under gevent's wrapper
        self.req = req
        self.rid = rid
        self.fmt: Any
        if req.messages_api:
            self.fmt = MessagesFormatter(rid, req.model, len(req.prompt_words))
        elif req.responses:
            self.fmt = ResponsesFormatter(rid, req.model, int(arrival_unix))
        else:
            self.fmt = api.StreamFormatter(req.chat, rid, req.model, int(arrival_unix))
        self.fault = fault
        self.seq: Sequence | None = None
        self.outbox: list[bytes] = []
        self.attention = gevent.event.Event()
        self.done = False
        self.gone = False
        self.text: list[str] = []
        self.arrival_mono = arrival_mono
        self.arrival_unix = arrival_unix
        self.first_mono: float | None = None
        self.last_mono: float | None = None
        self.sent = 0
        self.finish_reason = ""
        self.watcher = None
        self.outcome = "completed"
        self.max_tokens_cap = 0
        self.token_monos: list[float] | None = None  # --log-tokens: each token's send time
        self.pieces: list[str] | None = None  # JSON or tool-call reply: one piece per token
        self.tool: tuple[str, str] | None = None  # (call id, function name) of a tool-call reply

    # -- called by the driver, in order, for every emission -------------------------------------
    def on_emission(self, tokens: int, first: bool, finished: bool, generated: int) -> None:
        """``generated``: the sequence's token count after this emission (not ``seq.generated``,
        which a late driver's batch of emissions has already moved past)."""
        if self.done:
            return
        seq = self.seq
        assert seq is not None
        start = generated - tokens
        if self.pieces is None:
            words = [api.token_text(seq.seq_id, start + i) for i in range(tokens)]
        else:
            words = self.pieces[start:generated]
        self.text += words
        self.sent = generated
        if finished:
            self.finish_reason = "tool_calls" if self.tool is not None else (
                "length" if generated >= self.max_tokens_cap else "stop")
        if not self.req.stream:
            if finished:
                self._finish()
            return
        fmt = self.fmt
        if first and self.req.messages_api:
            fmt.cached = seq.cached_tokens  # message_start carries the prompt's cache reads
        parts = [fmt.role()] if first else []
        finish = self.finish_reason if finished else None
        if self.tool is None:
            parts.append(fmt.token("".join(words), finish))
        else:
            parts.append(fmt.tool_call(self.tool[0], self.tool[1] if start == 0 else None, "".join(words), finish))
        fault = self.fault
        end = finished
        if fault is not None and fault.kind in ("disconnect", "malformed", "stream_error") \
                and start < fault.after_tokens <= generated:
            if fault.kind == "malformed":
                parts.append(fmt.malformed())
            elif fault.kind == "stream_error":
                parts.append(fmt.error("mock fault: error inside the stream"))
                self.outcome = "fault:stream_error"
                end = True
            else:
                data = b"".join(parts)
                self._write(b"%x\r\n%b\r\n" % (len(data), data), tokens, last=True)
                self.outcome = "fault:disconnect"
                self._hang_up()
                return
        if end:
            if finished and self.req.include_usage:
                parts.append(fmt.usage(len(self.req.prompt_words), generated, seq.cached_tokens))
            parts.append(fmt.DONE)
        data = b"".join(parts)
        frame = b"%x\r\n%b\r\n" % (len(data), data)
        if end:
            frame += b"0\r\n\r\n"
        self._write(frame, tokens, last=end)
        if end:
            if not finished:
                self.engine.abort(seq)
            self._finish()

    def _write(self, frame: bytes, tokens: int, last: bool = False) -> None:
        if self.gone:
            return
        now = perf_counter()
        first = self.first_mono is None
        if first:
            self.first_mono = now
        self.last_mono = now
        if self.outbox:
            if self.token_monos is not None:
                self.token_monos += [now] * tokens
            self.outbox.append(frame)
            return
        try:
            if first or last or self.token_monos is not None:
                # The ground truth is the kernel's send time: a pause of the mock between reading
                # the clock and the write must not count as the client's. (Every token's when
                # --log-tokens asks for them all; the first and the last one's otherwise.)
                n, sent = netstamp.send_stamped(self.raw, frame)
                if sent is not None and now - 0.001 < sent:
                    now = sent
                    if first:
                        self.first_mono = sent
                    self.last_mono = sent
                if self.token_monos is not None:
                    self.token_monos += [now] * tokens
            else:
                n = self.raw.send(frame)
        except BlockingIOError:
            n = 0
        except OSError:
            self._client_gone()
            return
        if n < len(frame):
            self.outbox.append(frame[n:])
            self.attention.set()

    def _finish(self) -> None:
        self.done = True
        self.attention.set()

    def _hang_up(self) -> None:
        if self.seq is not None:
            self.engine.abort(self.seq)
        self.gone = True
        self.done = True
        try:
            self.raw.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self.attention.set()

    def _client_gone(self) -> None:
        if self.outcome == "completed":
            self.outcome = "disconnected"
        self._hang_up()

    # -- read watcher: the client closing its end -------------------------------------------------
    def on_readable(self) -> None:
        try:
            data = self.raw.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return
        except OSError:
            data = b""
        if data:  # a pipelined next request: not ours to read
            self.stop_watching()
            return
        self.stop_watching()
        if not self.done:
            self._client_gone()

    def stop_watching(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()
            self.watcher = None
