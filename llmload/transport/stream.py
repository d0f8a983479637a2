"""One streamed response, fed bytes as they arrive: HTTP head → body framing → SSE events →
classified chunks → the accumulator. Runs in the hub (the reader's callback), so it never blocks.

Usage::

    st = ResponseStream(raw_socket, StreamAccumulator(t0), timeout=60, waiter=Waiter(), reader=reader())
    st.on_readable(clock_offset)   # the reader calls it when the socket is readable
    st.on_data(data, now)          # or feed bytes directly (TLS, tests)
    state, detail, t_end = st.result
"""

from __future__ import annotations

import socket
from time import perf_counter
from typing import Any

from llmload import http1
from llmload import record as R
from llmload.netstamp import ANC_SIZE, TIMESPEC
from llmload.protocol import CHAT_CONTENT, PLAIN, SSEDecoder, classify, classify_event

RECV_SIZE = 65536
_VLLM_PLAIN_END = b'"finish_reason":null}]}\n\n\r\n'
_CONTENT_LEN = len(CHAT_CONTENT)


class ResponseStream:
    """One request's response, fed bytes as they arrive."""

    __slots__ = ("raw", "head_buf", "head", "body", "sse", "acc", "want_text", "code", "waiter", "fd",
                 "result", "last_progress", "timeout", "received", "reader", "err_body", "plain")

    def __init__(self, raw: socket.socket | None, acc: R.StreamAccumulator, timeout: float,
                 waiter: Any, reader: Any) -> None:
        self.raw = raw
        self.head_buf = b""
        self.head: http1.ResponseHead | None = None
        self.body: http1.BodyDecoder | None = None
        self.sse = SSEDecoder()
        self.acc = acc
        self.want_text = acc.want_text
        self.code = 0
        self.waiter = waiter
        self.fd = -1
        self.result: tuple[str, str, float] | None = None
        self.last_progress = acc.t0
        self.timeout = timeout
        self.received = 0
        self.reader = reader
        self.err_body: list[bytes] = []
        self.plain = False  # True while the inlined fast path in on_readable may be tried

    def on_readable(self, clock_offset: float) -> None:
        # Runs in the hub when the socket is readable: must never block.
        try:
            data, anc, _flags, _addr = self.raw.recvmsg(RECV_SIZE, ANC_SIZE)
        except BlockingIOError:
            return
        except OSError as e:
            self.end("eof", f"connection error: {e}")
            return
        if anc:  # netstamp.stamp inlined: this runs once per read of every stream
            sec, nsec = TIMESPEC.unpack_from(anc[0][2])
            now = sec - clock_offset + nsec * 1e-9
        else:
            now = perf_counter()
        if self.plain and data.endswith(_VLLM_PLAIN_END):
            # Deliberately inlined and ugly (≈3x cheaper than the general path below, which
            # gives the same answer): the read is exactly one HTTP chunk holding exactly one
            # single-line SSE event, "SIZE\r\ndata: {...}\n\n\r\n", that ends the way
            # vLLM/SGLang end a content delta without a finish reason, and whose delta starts
            # with non-empty content. Each `in` over a whole event costs ~0.4 µs; the checks here
            # look at the ends instead.
            i = data.find(b"\r\n")
            n = len(data)
            j = data.rfind(CHAT_CONTENT)
            if (0 < i <= 8 and data.startswith(b"data: ", i + 2) and data.find(b"\n", i + 2) == n - 4
                    and int(data[:i], 16) == n - i - 4 and j > 0 and data[j + _CONTENT_LEN] != 34):
                acc = self.acc
                acc.times.append(now)
                acc.last_event = now
                self.last_progress = now
                self.received += n
                return
        self.on_data(data, now)

    def on_data(self, data: bytes, now: float) -> None:
        if not data:
            if self.body is not None and self.body.until_close:
                self.end("complete", "")
            else:
                self.end("eof", "connection closed by the server mid-response")
            return
        self.last_progress = now
        self.received += len(data)
        try:
            if self.body is None:
                data = self._read_head(data)
                if self.body is None:
                    return
            payload, done = self.body.feed(data)
        except http1.HTTPError as e:
            self.acc.bad = f"invalid HTTP response: {e}"[:200]
            self.end("eof", "")
            return
        if payload:
            if self.code != 200:
                self.err_body.append(payload)
            elif self.acc.bad is None and self.acc.error is None:
                acc = self.acc
                times = acc.times
                want_text = self.want_text
                # The hot loop: most events are plain content deltas, handled without a call.
                for ev in self.sse.feed(payload):
                    ch = classify(ev, want_text) if type(ev) is bytes else classify_event(ev, want_text)
                    if ch is PLAIN:
                        times.append(now)
                        acc.last_event = now
                        if acc.first_visible is None:
                            acc.first_visible = now
                    else:
                        acc.add(ch, now)
            # after an error event the stream means nothing more: read on only to reuse the socket
        if done:
            self.end("complete", "")
            return
        acc = self.acc
        self.plain = (self.code == 200 and self.body.chunked and not self.want_text and acc.bad is None
                      and acc.error is None and acc.first_visible is not None and not self.sse.pending
                      and self.body.idle)

    def _read_head(self, data: bytes) -> bytes:
        buf = self.head_buf + data if self.head_buf else data
        while True:
            i = buf.find(http1.HEAD_END)
            if i < 0:
                if len(buf) > http1.MAX_HEAD:
                    raise http1.HTTPError("response head too large")
                self.head_buf = buf
                return b""
            head = http1.parse_head(buf[:i])
            buf = buf[i + 4:]
            if 100 <= head.status < 200:  # interim (100 Continue): the real head follows
                continue
            self.head_buf = b""
            self.head = head
            self.code = head.status
            self.body = http1.BodyDecoder(head)
            return buf

    def end(self, state: str, detail: str) -> None:
        if self.result is not None:
            return
        self.result = (state, detail, perf_counter())
        if self.reader is not None:
            self.reader.unwatch(self)
        if self.waiter is not None:
            self.waiter.switch(self.result)
