"""Streaming a request over HTTP and timing every event: the fast path and the openai-SDK path.

Both transports take a request body and return a :class:`~llmload.record.RequestRecord`;
for the same stream they produce the same record (tests/test_transport.py holds them to it).

**Fast path** (:class:`FastTransport`, default). Each Locust user owns one keep-alive
connection. After the request is written, the user greenlet parks on a ``Waiter``. One reader
per process (:class:`_Reader`) watches every stream's socket: on each wake-up it reads every
ready socket once, undoes the HTTP chunked framing (:mod:`llmload.http1`), splits SSE events,
classifies them mostly from bytes and stamps them with the kernel's receive time. One reader
instead of a read loop per greenlet, and no timer armed per read, are what HOTPATH.md measured
as the big wins; the request timeout is enforced by one checker greenlet instead. Timing rules
from the same measurements: nothing that can yield sits between t0 and the write (the
connection is checked and opened before t0), and every response is read to the end of the
HTTP message so the connection is reused instead of reconnecting inside the next request's
TTFT. TLS connections use the same parsing, read from the user greenlet, stamped on arrival.

**openai path** (:class:`OpenAITransport`, ``--transport openai``): the official SDK builds
and sends the request (auth, Azure, proxies as the SDK does them) and its ``Stream`` yields
chunk objects; the SDK swallows ``[DONE]``, so there a stream counts as complete when a
``finish_reason`` arrived.
"""

from __future__ import annotations

import json
import os
import socket
import ssl
import struct
import sys
import time
from collections.abc import Callable
from time import perf_counter
from typing import Any
from urllib.parse import urlsplit

import gevent
import gevent.socket
from gevent.hub import Waiter, get_hub
from gevent.monkey import get_original

from llmload import http1
from llmload import record as R
from llmload.protocol import (
    CHAT_CONTENT,
    PLAIN,
    SSEDecoder,
    classify,
    classify_event,
    error_message,
)

RECV_SIZE = 65536
CHECK_INTERVAL_S = 0.1
_VLLM_PLAIN_END = b'"finish_reason":null}]}\n\n\r\n'
_CONTENT_LEN = len(CHAT_CONTENT)
_SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform.startswith("linux") else 0)
_TIMESPEC = struct.Struct("@ll")  # struct timespec
_EPOLLIN = 1
_ANC_SIZE = socket.CMSG_SPACE(_TIMESPEC.size)


class Target:
    """Where requests go: scheme, host, port and the path of the endpoint."""

    __slots__ = ("scheme", "host", "port", "path", "host_header")

    def __init__(self, base_url: str, path: str) -> None:
        parts = urlsplit(base_url if "://" in base_url else "http://" + base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"--host {base_url!r}: expected http(s)://HOST[:PORT][/base/path]")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        base = parts.path.rstrip("/")
        if base.endswith("/v1") and path.startswith("/v1/"):
            base = base[:-3]  # accept both http://h:8000 and http://h:8000/v1
        self.path = base + path
        default_port = 443 if self.scheme == "https" else 80
        self.host_header = self.host if self.port == default_port else f"{self.host}:{self.port}"


class _Reader:
    """The process's one reader: every open stream's socket in one epoll set, one timeout checker.

    libev watches the epoll descriptor itself; each wake-up drains every ready socket in one
    Python call. Every read carries the kernel's receive timestamp (``SO_TIMESTAMPNS``,
    converted to the ``perf_counter`` clock), so a token's time is when it reached this machine,
    not when this loop got round to it: timings stay exact when the client falls behind
    (benchmarks/client_overhead.py: first-token timestamp error p99 < 0.01 ms at 1,024 streams).
    """

    def __init__(self) -> None:
        self.loop = get_hub().loop
        self.active: set[_Stream] = set()
        self.by_fd: dict[int, _Stream] = {}
        # gevent's monkey-patching hides epoll; the reader needs the real one (never blocks on it).
        self.epoll = get_original("select", "epoll")()
        self._io = self.loop.io(self.epoll.fileno(), 1)
        self._io.start(self._on_ready)
        self._checker: gevent.Greenlet | None = None

    def watch(self, st: _Stream, fd: int) -> None:
        self.epoll.register(fd, _EPOLLIN)
        st.fd = fd
        self.by_fd[fd] = st
        self.active.add(st)
        if self._checker is None or self._checker.dead:
            self._checker = gevent.spawn(self._check_timeouts)

    def unwatch(self, st: _Stream) -> None:
        fd = st.fd
        if fd >= 0 and self.by_fd.get(fd) is st:
            del self.by_fd[fd]
            try:
                self.epoll.unregister(fd)
            except OSError:
                pass  # already closed
        st.fd = -1
        self.active.discard(st)

    def _on_ready(self) -> None:
        # One pass over every ready socket per wake-up of the loop.
        ready = self.epoll.poll(0)
        # One offset per pass: kernel timestamps are CLOCK_REALTIME, ours CLOCK_MONOTONIC.
        offset = time.time() - perf_counter()
        by_fd = self.by_fd
        for fd, _ in ready:
            st = by_fd.get(fd)
            if st is not None:
                st.on_readable(offset)

    def _check_timeouts(self) -> None:
        while self.active:
            gevent.sleep(CHECK_INTERVAL_S)
            now = perf_counter()
            for st in list(self.active):
                if now - st.last_progress > st.timeout and st.result is None:
                    # Waiter.switch must run in the hub: hand the ending over to it.
                    self.loop.run_callback(st.end, "timeout", "no progress within the request timeout")


_readers: dict[tuple[int, int], _Reader] = {}


def _reader() -> _Reader:
    key = (os.getpid(), id(get_hub()))  # Locust --processes forks: one reader per process
    r = _readers.get(key)
    if r is None:
        r = _readers[key] = _Reader()
    return r


class _Stream:
    """One request's response, fed bytes as they arrive."""

    __slots__ = ("raw", "head_buf", "head", "body", "sse", "acc", "want_text", "code", "waiter", "fd",
                 "result", "last_progress", "timeout", "received", "reader", "err_body", "plain")

    def __init__(self, raw: socket.socket | None, acc: R.StreamAccumulator, timeout: float,
                 waiter: Waiter | None, reader: _Reader | None) -> None:
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
            data, anc, _flags, _addr = self.raw.recvmsg(RECV_SIZE, _ANC_SIZE)
        except BlockingIOError:
            return
        except OSError as e:
            self.end("eof", f"connection error: {e}")
            return
        if anc:
            sec, nsec = _TIMESPEC.unpack_from(anc[0][2])
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


class FastTransport:
    """One user's keep-alive connection to the server; see the module docstring.

    Usage::

        t = FastTransport("http://127.0.0.1:8000", "/v1/chat/completions", timeout=60)
        t.connect()                       # in on_start: the first request pays no TCP connect
        rec = t.stream(body_bytes, meta)  # -> RequestRecord
    """

    def __init__(self, base_url: str, path: str, api_key: str | None = None, timeout: float = 600.0,
                 connect_timeout: float = 10.0, extra_headers: dict[str, str] | None = None) -> None:
        self.target = Target(base_url, path)
        self.timeout = timeout
        self.connect_timeout = connect_timeout
        self.sock: socket.socket | None = None
        self._tls = self.target.scheme == "https"
        self._ssl_context = ssl.create_default_context() if self._tls else None
        head = [
            f"POST {self.target.path} HTTP/1.1",
            f"Host: {self.target.host_header}",
            "Content-Type: application/json",
            "Accept: text/event-stream",
            "User-Agent: llmload",
        ]
        if api_key:
            head.append(f"Authorization: Bearer {api_key}")
        for k, v in (extra_headers or {}).items():
            head.append(f"{k}: {v}")
        self._head = ("\r\n".join(head) + "\r\n").encode()

    def connect(self) -> None:
        """Open the connection now (raises OSError when the server cannot be reached)."""
        if self.sock is None:
            sock = gevent.socket.create_connection((self.target.host, self.target.port),
                                                   timeout=self.connect_timeout)
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if not self._tls and _SO_TIMESTAMPNS:
                try:
                    sock.setsockopt(socket.SOL_SOCKET, _SO_TIMESTAMPNS, 1)
                except OSError:
                    pass  # no kernel timestamps: reads are stamped on arrival instead
            if self._tls:
                sock = self._ssl_context.wrap_socket(sock, server_hostname=self.target.host)
            sock.settimeout(None)
            self.sock = sock

    def close(self) -> None:
        if self.sock is not None:
            try:
                self.sock.close()
            except OSError:
                pass
            self.sock = None

    def _connection_alive(self) -> bool:
        sock = self.sock
        if sock is None:
            return False
        if self._tls:
            return True
        try:
            sock._sock.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return True  # nothing to read: open and idle
        except OSError:
            pass
        return False  # EOF, an error, or stray bytes: either way not reusable

    def stream(self, body: bytes, meta: R.RequestMeta, want_text: bool = False,
               headers: dict[str, str] | None = None,
               on_cancel: Callable[[R.RequestRecord], None] | None = None) -> R.RequestRecord:
        """Send one streaming request and time it; never raises for server or network faults.

        When the calling greenlet is killed mid-request (the end of a test), ``on_cancel``
        gets the ``cancelled`` record before the kill propagates."""
        extra = f"X-Request-Id: {meta.request_id}\r\n"
        if headers:
            extra += "".join(f"{k}: {v}\r\n" for k, v in headers.items())
        data = self._head + f"{extra}Content-Length: {len(body)}\r\n\r\n".encode() + body
        for attempt in (0, 1):
            reused = self.sock is not None
            if reused and not self._connection_alive():
                self.close()
                reused = False
            if self.sock is None:
                c0 = perf_counter()
                try:
                    self.connect()
                except (OSError, gevent.Timeout) as e:
                    self.close()
                    return R.failed_record(meta, R.CONNECT_ERROR, f"cannot connect to "
                                           f"{self.target.host}:{self.target.port}: {e}",
                                           e2e_ms=(perf_counter() - c0) * 1000.0)
            rec = self._exchange(data, meta, want_text, on_cancel)
            if rec is not None:
                return rec
            # A reused keep-alive connection the server had just closed: retry once, fresh.
            self.close()
            if not reused or attempt:
                break
        return R.failed_record(meta, R.CONNECT_ERROR, "connection closed before any response")

    def _exchange(self, data: bytes, meta: R.RequestMeta, want_text: bool,
                  on_cancel: Callable[[R.RequestRecord], None] | None) -> R.RequestRecord | None:
        sock = self.sock
        assert sock is not None
        tls = self._tls
        reader = None if tls else _reader()
        waiter = None if tls else Waiter()
        acc = R.StreamAccumulator(0.0, want_text)
        st = _Stream(None if tls else sock._sock, acc, self.timeout, waiter, reader)
        if reader is not None:
            reader.watch(st, sock.fileno())
        meta.start_time = time.time()
        t0 = acc.t0 = st.last_progress = perf_counter()
        try:
            sock.sendall(data)
            if tls:
                self._read_tls(st)
            else:
                waiter.get()
        except OSError as e:
            st.end("eof", f"connection error: {e}")
        except BaseException:
            # Killed by the end of the test (GreenletExit) or the user's own timeout.
            if st.result is None:
                st.end("cancelled", "")
            if reader is not None:
                reader.unwatch(st)
            self.close()
            if on_cancel is not None:
                on_cancel(acc.finish(meta, "cancelled", perf_counter(), http_status=st.code or None))
            raise
        state, detail, t_end = st.result
        if state == "eof" and st.received == 0 and not acc.bad:
            return None
        if state == "complete":  # an event cut off by EOF or a timeout is truncation, not garbage
            for ev in st.sse.flush():
                acc.add(classify_event(ev, want_text), t_end)
        if state != "complete" or st.head is None or not st.head.keep_alive or st.body.until_close:
            self.close()
        code = st.code
        if code and code != 200 and state == "complete":
            body = b"".join(st.err_body)
            return R.failed_record(meta, R.status_for_http(code), error_message(body), http_status=code,
                                   e2e_ms=(t_end - t0) * 1000.0)
        if code and code != 200:
            return R.failed_record(meta, R.status_for_http(code), detail or "error response cut off",
                                   http_status=code, e2e_ms=(t_end - t0) * 1000.0)
        return acc.finish(meta, state, t_end, http_status=code or None, detail=detail)

    def _read_tls(self, st: _Stream) -> None:
        sock = self.sock
        sock.settimeout(self.timeout)
        try:
            while st.result is None:
                try:
                    data = sock.recv(RECV_SIZE)
                except TimeoutError:
                    st.end("timeout", "no progress within the request timeout")
                    return
                st.on_data(data, perf_counter())
        finally:
            if self.sock is not None:
                self.sock.settimeout(None)


class OpenAITransport:
    """The official openai SDK, for exact SDK behaviour; see the module docstring."""

    _STANDARD_KEYS = frozenset({
        "model", "messages", "prompt", "max_tokens", "max_completion_tokens", "stream_options", "temperature",
        "top_p", "n", "stop", "seed", "presence_penalty", "frequency_penalty", "logit_bias", "logprobs",
        "top_logprobs", "user", "tools", "tool_choice", "response_format", "reasoning_effort",
    })

    def __init__(self, base_url: str, path: str, api_key: str | None = None, timeout: float = 600.0,
                 connect_timeout: float = 10.0) -> None:
        import openai

        self._openai = openai
        target = Target(base_url, path)
        self.chat = path.rstrip("/").endswith("chat/completions")
        suffix = "/chat/completions" if self.chat else "/completions"
        base_path = target.path[: -len(suffix)] if target.path.endswith(suffix) else target.path.rsplit("/", 1)[0]
        self.client = openai.OpenAI(
            base_url=f"{target.scheme}://{target.host_header}{base_path}", api_key=api_key or "EMPTY",
            max_retries=0, timeout=openai.Timeout(timeout, connect=connect_timeout),
        )

    def connect(self) -> None:
        """Open a pooled connection ahead of the first request (the SDK connects lazily)."""
        try:
            self.client.with_options(timeout=5.0).models.list()
        except self._openai.OpenAIError:
            pass  # servers without /v1/models: the first request connects instead

    def close(self) -> None:
        self.client.close()

    def stream(self, body: bytes | dict[str, Any], meta: R.RequestMeta, want_text: bool = False,
               headers: dict[str, str] | None = None,
               on_cancel: Callable[[R.RequestRecord], None] | None = None) -> R.RequestRecord:
        """Same contract as :meth:`FastTransport.stream`."""
        openai = self._openai
        fields = json.loads(body) if isinstance(body, bytes | bytearray) else dict(body)
        fields.pop("stream", None)
        std = {k: v for k, v in fields.items() if k in self._STANDARD_KEYS}
        extra_body = {k: v for k, v in fields.items() if k not in self._STANDARD_KEYS}
        hdrs = {"X-Request-Id": meta.request_id, **(headers or {})}
        api = self.client.chat.completions if self.chat else self.client.completions
        meta.start_time = time.time()
        t0 = perf_counter()
        acc = R.StreamAccumulator(t0, want_text)
        try:
            stream = api.create(stream=True, extra_headers=hdrs, extra_body=extra_body or None, **std)
        except openai.APIError as e:
            return self._failed(meta, e, t0)
        except BaseException:
            if on_cancel is not None:
                on_cancel(acc.finish(meta, "cancelled", perf_counter(), http_status=None))
            raise
        state, detail = "complete", ""
        interpret = _interpret_sdk_chunk
        try:
            for chunk in stream:
                now = perf_counter()
                acc.add(interpret(chunk), now)
        except openai.APITimeoutError:
            state, detail = "timeout", "no progress within the request timeout"
        except openai.APIError as e:  # an error object inside the stream, or a broken connection
            if isinstance(e, openai.APIConnectionError):
                state, detail = "eof", f"connection closed mid-stream: {e.__cause__ or e}"[:300]
            else:
                acc.error = str(e.message)[:500]
        except ValueError as e:  # malformed JSON in an event
            acc.bad = f"invalid JSON in SSE data: {e}"[:200]
        except Exception as e:  # the SDK's HTTP layer raising past its own wrappers
            state, detail = "eof", f"connection closed mid-stream: {e.__class__.__name__}: {e}"[:300]
        except BaseException:
            if on_cancel is not None:
                on_cancel(acc.finish(meta, "cancelled", perf_counter(), http_status=stream.response.status_code))
            raise
        finally:
            stream.close()
        t_end = perf_counter()
        if state == "complete" and acc.finish_reason is not None:
            acc.done = True  # the SDK consumed the [DONE] that ended the loop
            acc.last_event = t_end
        return acc.finish(meta, state, t_end, http_status=stream.response.status_code, detail=detail)

    def _failed(self, meta: R.RequestMeta, e: Exception, t0: float) -> R.RequestRecord:
        openai = self._openai
        e2e = (perf_counter() - t0) * 1000.0
        if isinstance(e, openai.APIStatusError):
            return R.failed_record(meta, R.status_for_http(e.status_code), error_message(e.response.content),
                                   http_status=e.status_code, e2e_ms=e2e)
        if isinstance(e, openai.APITimeoutError):
            return R.failed_record(meta, R.TIMEOUT, "no response within the request timeout", e2e_ms=e2e)
        return R.failed_record(meta, R.CONNECT_ERROR, f"{e}: {e.__cause__}"[:300], e2e_ms=e2e)


def _interpret_sdk_chunk(chunk: Any) -> Any:
    from llmload.protocol import interpret

    return interpret(chunk.to_dict() if hasattr(chunk, "to_dict") else chunk.model_dump())
