"""Streaming a request over HTTP and timing every event: the fast path and the openai-SDK path.

Both transports take a request body and return a :class:`~llmload.record.RequestRecord`;
for the same stream they produce the same record (tests/test_transport.py holds them to it).

**Fast path** (:class:`FastTransport`, default). Each Locust user owns one keep-alive
connection. After the request is written, the user greenlet parks on a ``Waiter``; a libev
read watcher per stream, run by the hub, does one ``recv`` per wake-up, feeds the bytes to
geventhttpclient's C HTTP parser (chunked decoding), splits SSE events, classifies them
mostly from bytes, and timestamps them on arrival. One reader per process instead of a read
loop per greenlet, and no timer armed per read, are what HOTPATH.md measured as the big wins
(≈2.5x tokens per CPU-second); the request timeout is enforced by one checker greenlet.
Timing rules from the same measurements: nothing that can yield sits between t0 and the
write (the connection is checked and opened before t0), and every response is read to the
end of the HTTP message so the connection is reused instead of reconnecting inside the next
request's TTFT. TLS connections use the same parsing, read from the user greenlet.

**openai path** (:class:`OpenAITransport`, ``--transport openai``): the official SDK builds
and sends the request (auth, Azure, proxies as the SDK does them) and its ``Stream`` yields
chunk objects; the SDK swallows ``[DONE]``, so there a stream counts as complete when a
``finish_reason`` arrived.
"""

from __future__ import annotations

import json
import socket
import ssl
import time
from time import perf_counter
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import gevent
from gevent.hub import Waiter, get_hub
from geventhttpclient.response import HTTPParseError, HTTPResponse

from llmload import record as R
from llmload.protocol import PLAIN, SSEDecoder, classify, classify_event, error_message

RECV_SIZE = 262144
CHECK_INTERVAL_S = 0.1


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
    """The process's one reader: io watchers for every open stream, one timeout checker."""

    def __init__(self) -> None:
        self.loop = get_hub().loop
        self.active: set[_Stream] = set()
        self._checker: gevent.Greenlet | None = None

    def watch(self, st: _Stream, fd: int) -> None:
        st.watcher = w = self.loop.io(fd, 1)
        w.start(st.on_readable)
        self.active.add(st)
        if self._checker is None or self._checker.dead:
            self._checker = gevent.spawn(self._check_timeouts)

    def unwatch(self, st: _Stream) -> None:
        w = st.watcher
        if w is not None:
            w.stop()
            w.close()
            st.watcher = None
        self.active.discard(st)

    def _check_timeouts(self) -> None:
        while self.active:
            gevent.sleep(CHECK_INTERVAL_S)
            now = perf_counter()
            for st in list(self.active):
                if now - st.last_progress > st.timeout and st.result is None:
                    # Waiter.switch must run in the hub: hand the ending over to it.
                    self.loop.run_callback(st.end, "timeout", "no progress within the request timeout")


_readers: dict[int, _Reader] = {}


def _reader() -> _Reader:
    hub = get_hub()
    r = _readers.get(id(hub))
    if r is None:
        r = _readers[id(hub)] = _Reader()
    return r


class _Stream:
    """One request's response, fed bytes as they arrive."""

    __slots__ = ("raw", "parser", "sse", "acc", "want_text", "code", "waiter", "watcher", "result",
                 "last_progress", "timeout", "received", "reader")

    def __init__(self, raw: socket.socket | None, acc: R.StreamAccumulator, timeout: float,
                 waiter: Waiter | None, reader: _Reader | None) -> None:
        self.raw = raw
        self.parser = HTTPResponse("POST")
        self.sse = SSEDecoder()
        self.acc = acc
        self.want_text = acc.want_text
        self.code = 0
        self.waiter = waiter
        self.watcher = None
        self.result: tuple[str, str, float] | None = None
        self.last_progress = acc.t0
        self.timeout = timeout
        self.received = 0
        self.reader = reader

    def on_readable(self) -> None:
        # Runs in the hub for every wake-up of this stream's socket: must never block.
        try:
            data = self.raw.recv(RECV_SIZE)
        except BlockingIOError:
            return
        except OSError as e:
            self.end("eof", f"connection error: {e}")
            return
        self.on_data(data, perf_counter())

    def on_data(self, data: bytes, now: float) -> None:
        if not data:
            self.end("eof", "connection closed by the server mid-response")
            return
        self.last_progress = now
        self.received += len(data)
        p = self.parser
        try:
            p.feed(data)
        except HTTPParseError as e:
            self.acc.bad = f"invalid HTTP response: {e}"[:200]
            self.end("eof", "")
            return
        if not p.headers_complete:
            return
        code = self.code
        if not code:
            code = self.code = p.get_code()
        buf = p._body_buffer
        if buf and code == 200 and (self.acc.bad is not None or self.acc.error is not None):
            del buf[:]  # after an error the stream means nothing more; read on only to reuse the socket
        elif buf and code == 200:
            body = bytes(buf)
            del buf[:]
            acc = self.acc
            times = acc.times
            want_text = self.want_text
            # The hot loop: most events are plain content deltas, handled without a call.
            for ev in self.sse.feed(body):
                ch = classify(ev, want_text) if type(ev) is bytes else classify_event(ev, want_text)
                if ch is PLAIN:
                    times.append(now)
                    acc.events += 1
                    acc.last_event = now
                    if acc.first_visible is None:
                        acc.first_visible = now
                else:
                    acc.add(ch, now)
        if p.message_complete:
            self.end("complete", "")

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
            data = sock._sock.recv(1, socket.MSG_PEEK)
        except BlockingIOError:
            return True
        except OSError:
            data = b""
        return False  # EOF, or stray bytes: either way not reusable

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
        for ev in st.sse.flush():
            acc.add(classify_event(ev, want_text), t_end)
        if state != "complete" or not st.parser.should_keep_alive():
            self.close()
        code = st.code
        if code and code != 200 and state == "complete":
            body = bytes(st.parser._body_buffer)
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
                except (TimeoutError, socket.timeout):
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
