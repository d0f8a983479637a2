"""One streamed response, fed bytes as they arrive: HTTP head → body framing (and gzip, when a
server sends it anyway) → SSE events → classified chunks → the accumulator. Runs in the hub (the
reader's callback), so it never blocks.

Limits, so no server can stall the loop or grow memory without bound: an SSE line or event over
``max_event_bytes`` ends the request as ``protocol_error`` at once, and so does a compressed body
that inflates past the limits of wire/inflate.py, or more output events than
:func:`output_event_cap` allows for the request's max_tokens; an error body is kept to
``MAX_ERROR_BODY``; a 2xx body that is not an event stream is read (bounded) for its message.
Three deadlines end a request as ``timeout``: no output event within ``first_token_timeout`` of t0
(comments, headers and role chunks do not count), no output event for ``idle_timeout`` after
the last one, and (``--request-deadline``) the whole request; the reader's checker enforces them and
the event cap (no timer per read, no work per token).

A read that carries more than one output event stamps them all with one time: the gaps between them,
and the gap before them, cannot be known. They are counted (``coalesced_reads``) and left out of the
ITL histogram and itl_max.

Usage::

    st = ResponseStream(raw_socket, StreamAccumulator(t0), Deadlines(60, 600), waiter=Waiter(), reader=reader())
    st.on_readable(offset, pass_start)   # the reader calls it when the socket is readable
    st.on_data(data, now)          # or feed bytes directly (TLS, tests)
    state, detail, t_end = st.result
"""

from __future__ import annotations

import socket
from time import perf_counter
from typing import Any

from llmload.metrics import record as R
from llmload.net.timestamps import ANC_SIZE, TIMESPEC
from llmload.transport.deadlines import Deadlines, output_event_cap, over_cap_error
from llmload.wire import http1
from llmload.wire.chunks import (
    CHAT_CONTENT,
    DELTA_KEY,
    ERROR_KEY,
    FINISH_KEY,
    FINISH_NULL,
    PLAIN,
    USAGE_OBJECT,
    classify,
    classify_event,
)
from llmload.wire.inflate import ENCODINGS as INFLATE_ENCODINGS
from llmload.wire.inflate import InflateError, Inflater
from llmload.wire.sse import DEFAULT_MAX_BYTES, SSEDecoder, SSEError

RECV_SIZE = 65536
MAX_ERROR_BODY = 64 * 1024
_CONTENT_LEN = len(CHAT_CONTENT)
_EVENT_END = b"}\n\n\r\n"  # a chunk that is one single-line JSON event: "SIZE\r\ndata: {...}\n\n\r\n"


def is_event_stream(head: http1.ResponseHead) -> bool | None:
    """True/False from Content-Type; None when there is none (decided from the body's first byte)."""
    ctype = head.headers.get("content-type")
    if ctype is None:
        return None
    return "event-stream" in ctype.lower()


def take_events(acc: R.StreamAccumulator, sse: SSEDecoder, payload: bytes, now: float,
                want_text: bool) -> str | None:
    """Feed body bytes that arrived at ``now`` through the SSE decoder into the accumulator.
    Returns the protocol error that must end the request at once (an over-long line), else None."""
    if acc.done or acc.bad is not None:
        return None  # nothing after the end, or after an event that could not be read, counts
    try:
        events = sse.feed(payload)
    except SSEError as e:
        acc.bad = str(e)
        return acc.bad
    times = acc.times
    n0 = len(times)
    live = acc.error is None
    # The hot loop: most events are plain content deltas, handled without a call.
    for ev in events:
        ch = classify(ev, want_text) if type(ev) is bytes else classify_event(ev, want_text)
        if ch is PLAIN and live:
            times.append(now)
            acc.last_event = now
            if acc.first_visible is None:
                acc.first_visible = now
        else:
            acc.add(ch, now)
            if acc.done or acc.bad is not None:
                break  # events after the end mean nothing
            live = acc.error is None
    if len(times) - n0 > 1:
        acc.coalesced(n0, len(times) - n0)
    return None


class ResponseStream:
    """One request's response, fed bytes as they arrive."""

    __slots__ = ("raw", "head_buf", "head", "body", "sse", "acc", "want_text", "code", "waiter", "fd",
                 "result", "deadlines", "received", "reader", "err_body", "err_len", "plain", "sse_body",
                 "inflate", "max_tokens", "max_events", "max_body", "last_read", "head_len", "unstamped")

    def __init__(self, raw: socket.socket | None, acc: R.StreamAccumulator, deadlines: Deadlines,
                 waiter: Any, reader: Any, max_event_bytes: int = DEFAULT_MAX_BYTES,
                 max_tokens: int | None = None) -> None:
        self.raw = raw
        self.head_buf = b""
        self.head: http1.ResponseHead | None = None
        self.body: http1.BodyDecoder | None = None
        self.sse = SSEDecoder(max_event_bytes)
        self.acc = acc
        self.want_text = acc.want_text
        self.code = 0
        self.waiter = waiter
        self.fd = -1
        self.result: tuple[str, str, float] | None = None
        self.deadlines = deadlines
        self.received = 0
        self.reader = reader
        self.err_body: list[bytes] = []  # an error response's body, or a 2xx body that is not SSE
        self.err_len = 0
        self.plain = False  # True while the inlined fast path in on_readable may be tried
        self.sse_body: bool | None = None  # None until the head (and maybe the first byte) says
        self.inflate: Inflater | None = None  # set when the server compressed the body
        self.max_tokens = max_tokens
        self.max_events = output_event_cap(max_tokens)
        self.max_body = MAX_ERROR_BODY  # a body that is not an event stream: what is kept of it (raised for
        self.last_read: float | None = None  # whole-body requests, e.g. embeddings) and when its last bytes came
        self.head_len = 0  # bytes of the response head(s): received minus these is the body's size on the wire
        self.unstamped = False  # a read came without the kernel's receive time: stamped on arrival instead

    def deadline(self) -> float:
        """When this request times out unless an output event arrives before (or, with a request
        deadline, at the latest)."""
        times = self.acc.times
        d = self.deadlines
        t = times[-1] + d.idle if times else self.acc.t0 + d.first_token
        if d.request is not None and self.acc.t0 + d.request < t:
            return self.acc.t0 + d.request
        return t

    def timeout_detail(self) -> str:
        return self.deadlines.detail(self.acc.t0, self.acc.times)

    def over_cap(self) -> bool:
        """True (and the request ended as a protocol error) once the server sent more output events
        than ``max_events``. The reader's checker asks, not the SSE loop: no work per token."""
        if len(self.acc.times) <= self.max_events or self.result is not None:
            return False
        if self.acc.bad is None:
            self.acc.bad = over_cap_error(self.max_tokens, self.max_events)
        self.end("eof", "")
        return True

    def on_readable(self, clock_offset: float, pass_start: float) -> None:
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
            if now > pass_start and now > perf_counter():
                now = perf_counter()  # the wall clock stepped since the packet came: a stamp cannot lie ahead
        else:
            now = perf_counter()
            self.unstamped = True
        if self.plain and data[-5:] == _EVENT_END:
            # Deliberately inlined and ugly (≈3x cheaper than the general path below, which gives
            # the same answer): the read is exactly one HTTP chunk holding exactly one single-line
            # SSE event whose data is a plain content delta (chunks.is_plain's test, on the bytes
            # of the read: one "delta", non-empty content, one "finish_reason" and it null, no usage
            # object, no "error"). A size line with an extension makes int() fail: the general path reads it.
            i = data.find(b"\r\n")
            n = len(data)
            if 0 < i <= 8 and data.startswith(b"data: ", i + 2) and data.find(b"\n", i + 2) == n - 4:
                j = data.find(CHAT_CONTENT, i)
                try:
                    size = int(data[:i], 16)
                except ValueError:
                    size = -1
                if (size == n - i - 4 and j > 0 and data[j + _CONTENT_LEN] != 34 and data.rfind(DELTA_KEY) == j
                        and FINISH_NULL in data and USAGE_OBJECT not in data and ERROR_KEY not in data
                        and data.count(FINISH_KEY) == 1):
                    acc = self.acc
                    acc.times.append(now)
                    acc.last_event = now
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
        self.received += len(data)
        acc = self.acc
        try:
            if self.body is None:
                data = self._read_head(data)
                if self.body is None:
                    return
            payload, done = self.body.feed(data)
        except http1.HTTPError as e:
            acc.bad = f"invalid HTTP response: {e}"[:200]
            self.end("eof", "")
            return
        if payload:
            if self.inflate is None:
                if self._take(payload, done, now):
                    return
            elif self._take_compressed(payload, done, now):
                return
        if done:
            self.end("complete", "")
            return
        self.plain = (self.sse_body is True and self.body.chunked and not self.want_text and self.inflate is None
                      and acc.bad is None and acc.error is None and not acc.done and acc.first_visible is not None
                      and not self.sse.pending and self.body.idle)

    def _take(self, payload: bytes, done: bool, now: float) -> bool:
        """Body bytes (inflated, if the server compressed them); True when they ended the request."""
        acc = self.acc
        if self.sse_body is None:  # no Content-Type: an event stream starts with a field, not JSON
            self.sse_body = payload.lstrip()[:1] not in (b"{", b"[")
        if not self.sse_body:
            self.err_len += len(payload)
            self.last_read = now
            if self.err_len <= self.max_body:
                self.err_body.append(payload)
            elif not done:  # enough of it to say what went wrong; the rest is not read
                self.end("error_body_cut", "")
                return True
        elif not acc.done and acc.bad is None:
            self._events(payload, now)
            return self.result is not None
        return False

    def _take_compressed(self, payload: bytes, done: bool, now: float) -> bool:
        # Slice by slice (wire/inflate.py): a read that would inflate past the limits ends the request.
        inflater = self.inflate
        times = self.acc.times
        try:
            for piece in inflater.slices(payload):
                n = len(times)
                if self._take(piece, done, now):
                    return True
                if len(times) > n:
                    inflater.output_seen()
        except InflateError as e:
            self.acc.bad = str(e)[:200]
            self.end("eof", "")
            return True
        return False

    def _events(self, payload: bytes, now: float) -> None:
        error = take_events(self.acc, self.sse, payload, now, self.want_text)
        if error is not None:
            self.end("eof", "")

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
            self.head_len += i + 4
            if 100 <= head.status < 200:  # interim (100 Continue): the real head follows
                continue
            self.head_buf = b""
            self.head = head
            self.code = head.status
            self.body = http1.BodyDecoder(head)
            self.sse_body = is_event_stream(head) if 200 <= head.status < 300 else False
            encoding = head.headers.get("content-encoding", "identity").lower().strip()
            if encoding not in ("", "identity"):
                self.acc.content_encoding = encoding
                if encoding in INFLATE_ENCODINGS:
                    self.inflate = Inflater(encoding, self.sse.max_bytes)
                else:
                    raise http1.HTTPError(f"unsupported Content-Encoding {encoding!r} (llmload sends "
                                          "Accept-Encoding: identity)")
            return buf

    def end(self, state: str, detail: str) -> None:
        if self.result is not None:
            return
        self.result = (state, detail, perf_counter())
        if self.reader is not None:
            self.reader.unwatch(self)
        if self.waiter is not None:
            self.waiter.switch(self.result)

    def error_body(self) -> bytes:
        return b"".join(self.err_body)[:MAX_ERROR_BODY]

    def whole_body(self) -> bytes:
        """The body that is not an event stream, as far as ``max_body`` kept it."""
        return b"".join(self.err_body)
