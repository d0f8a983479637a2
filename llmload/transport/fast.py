"""The fast transport: one keep-alive connection per user, streams read by the process's one reader.

Timing rules (docs/architecture.md#the-hot-path): nothing that can yield sits between t0 and the write (the
connection, through a proxy and TLS if any, is checked and opened before t0), and every response is
read to the end of the HTTP message so the connection is reused instead of reconnecting inside the
next request's TTFT. TLS connections use the same parsing, read from the user greenlet, stamped on
arrival. Requests say ``Accept-Encoding: identity``; a compressed body is decoded anyway.

Usage::

    t = FastTransport("http://127.0.0.1:8000", "/v1/chat/completions", ClientOptions(timeout=60))
    t.connect()                       # in on_start: the first request pays no TCP connect
    rec = t.stream(body_bytes, meta)  # -> RequestRecord
"""

from __future__ import annotations

import dataclasses
import socket
import time
from collections.abc import Callable
from time import perf_counter
from typing import Any

import gevent
import gevent.socket
from gevent.hub import Waiter

from llmload.metrics import record as R
from llmload.net import timestamps as netstamp
from llmload.net.limits import explain_connect_error
from llmload.net.turns import yield_if_turn_is_long
from llmload.transport.connection import ClientOptions, proxy_for
from llmload.transport.reader import reader as process_reader
from llmload.transport.stream import RECV_SIZE, Deadlines, ResponseStream
from llmload.transport.target import Target
from llmload.wire import http1
from llmload.wire.chunks import classify_event
from llmload.wire.endpoints import end_event_for
from llmload.wire.protocol import error_message

MAX_WHOLE_BODY = 64 << 20  # a whole-body answer (embeddings): 64 MiB, e.g. 2,048 vectors of 4,096 floats

BodyCheck = Callable[[bytes, R.RequestMeta, float, int], R.RequestRecord]
"""Makes a whole-body request's record: (body, meta, latency_ms, http_status) → record."""


class FastTransport:
    """One user's keep-alive connection to the server; see the module docstring."""

    def __init__(self, base_url: str, path: str, options: ClientOptions | None = None,
                 accept: str = "text/event-stream", content_type: str = "application/json",
                 **settings: Any) -> None:
        """``settings`` override fields of ``options`` (``timeout=60``, ``api_key=...``); ``accept``: the
        Accept header (``application/json`` for whole-body endpoints such as embeddings); ``content_type``:
        the body's (``multipart/form-data; boundary=...`` for audio transcription)."""
        self.options = options = dataclasses.replace(options or ClientOptions(), **settings)
        self.target = Target(base_url, path, options.query)
        self.sock: socket.socket | None = None
        self._tx_stamps = False  # the kernel stamps our sends: t0 is when the request really left
        self._tls = self.target.scheme == "https"
        self._ssl_context = options.ssl_context() if self._tls else None
        self._proxy = proxy_for(self.target.scheme, self.target.host)
        self._deadlines = Deadlines(options.first_token_deadline, options.timeout, options.request_deadline)
        self._end_event = end_event_for(path)  # the Messages API's message_stop: a stream without it is cut
        # Through an HTTP proxy a plain-http request names the whole URL; an https one tunnels.
        request_target = self.target.url if self._proxy and not self._tls else self.target.path
        head = [
            f"POST {request_target} HTTP/1.1",
            f"Host: {self.target.host_header}",
            f"Content-Type: {content_type}",
            f"Accept: {accept}",
            "Accept-Encoding: identity",
            "User-Agent: llmload",
        ]
        head += [f"{k}: {v}" for k, v in options.request_headers()]
        proxy_auth = self._proxy.headers() if self._proxy and not self._tls else ""
        self._head = ("\r\n".join(head) + "\r\n" + proxy_auth).encode()

    def connect(self) -> None:
        """Open the connection now (raises OSError when the server or the proxy cannot be reached)."""
        if self.sock is not None:
            return
        t = self.target
        proxy = self._proxy
        addr = (proxy.host, proxy.port) if proxy else (t.host, t.port)
        sock = gevent.socket.create_connection(addr, timeout=self.options.connect_timeout)
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if proxy and self._tls:
                self._tunnel(sock)
            if self._tls:
                sock = self._ssl_context.wrap_socket(sock, server_hostname=t.host)
            else:
                netstamp.enable(sock)  # without kernel timestamps reads are stamped on arrival instead
                self._tx_stamps = netstamp.enable_tx(sock)
            sock.settimeout(None)
        except BaseException:
            sock.close()
            raise
        self.sock = sock

    def _tunnel(self, sock: socket.socket) -> None:
        t = self.target
        sock.sendall(f"CONNECT {t.host}:{t.port} HTTP/1.1\r\nHost: {t.host}:{t.port}\r\n"
                     f"{self._proxy.headers()}\r\n".encode())
        buf = b""
        while http1.HEAD_END not in buf:
            data = sock.recv(4096)
            if not data or len(buf) > http1.MAX_HEAD:
                raise ConnectionError("the proxy closed the connection during CONNECT")
            buf += data
        head = http1.parse_head(buf[:buf.index(http1.HEAD_END)])
        if head.status != 200:
            raise ConnectionError(f"the proxy refused CONNECT {t.host}:{t.port}: {head.status} {head.reason}")

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
               on_cancel: Callable[[R.RequestRecord], None] | None = None,
               check_body: BodyCheck | None = None) -> R.RequestRecord:
        """Send one streaming request and time it; never raises for server or network faults.

        When the calling greenlet is killed mid-request (the end of a test), ``on_cancel``
        gets the request's record (``cancelled``, or what it was if it had just ended) before
        the kill propagates. ``check_body``: the request answers with one whole body, not a
        stream (embeddings): a 2xx body of up to ``MAX_WHOLE_BODY`` bytes is read to its end and
        ``check_body(body, meta, latency_ms, status)`` makes the record (latency: t0 to the
        kernel's receive time of the body's last bytes)."""
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
                meta.start_time = time.time()  # a request that never gets sent still has its time (sent: reset)
                try:
                    self.connect()
                except (OSError, gevent.Timeout, ValueError) as e:
                    self.close()
                    where = f"{self.target.host}:{self.target.port}"
                    if self._proxy:
                        where += f" through the proxy {self._proxy.host}:{self._proxy.port}"
                    return R.failed_record(meta, R.CONNECT_ERROR, f"cannot connect to {where}: "
                                           f"{explain_connect_error(e)}",
                                           e2e_ms=(perf_counter() - c0) * 1000.0)
                except BaseException:  # killed while connecting (the end of a test): it still gets its row
                    self.close()
                    if on_cancel is not None:
                        on_cancel(R.failed_record(meta, R.CANCELLED, R.NEVER_SENT,
                                                  e2e_ms=(perf_counter() - c0) * 1000.0))
                    raise
            rec = self._exchange(data, meta, want_text, on_cancel, check_body)
            if rec is not None:
                return rec
            # A reused keep-alive connection the server had just closed: retry once, fresh.
            self.close()
            if not reused or attempt:
                break
        return R.failed_record(meta, R.CONNECT_ERROR, "connection closed before any response")

    def _exchange(self, data: bytes, meta: R.RequestMeta, want_text: bool,
                  on_cancel: Callable[[R.RequestRecord], None] | None,
                  check_body: BodyCheck | None = None) -> R.RequestRecord | None:
        sock = self.sock
        assert sock is not None
        tls = self._tls
        reader = None if tls else process_reader()
        waiter = None if tls else Waiter()
        acc = R.StreamAccumulator(0.0, want_text)
        acc.end_event = self._end_event
        st = ResponseStream(None if tls else sock._sock, acc, self._deadlines, waiter, reader,
                            self.options.max_event_bytes, meta.max_tokens)
        if check_body is not None:
            st.max_body = MAX_WHOLE_BODY
        if reader is not None:
            reader.watch(st, sock.fileno())
        meta.start_time = time.time()
        t0 = acc.t0 = perf_counter()
        try:
            sock.sendall(data)
            if self._tx_stamps:
                # t0 is when the kernel sent the request: a pause of this process between taking
                # the time and the write (a preemption, a GC pass) must not count as the server's.
                sent = netstamp.sent_at(sock._sock, netstamp.clock_offset())
                if sent is not None and t0 - 0.001 < sent <= perf_counter():
                    meta.start_time += sent - t0
                    t0 = acc.t0 = sent
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
        if state == "complete" and st.sse_body:  # an event cut off by EOF or a timeout is truncation
            try:
                for ev in st.sse.flush():
                    acc.add(classify_event(ev, want_text), t_end)
            except ValueError as e:  # SSEError: the last line was over the limit
                acc.bad = str(e)
        if state != "complete" or st.head is None or not st.head.keep_alive or st.body.until_close:
            self.close()
        try:
            # A server's decode step ends many streams in one read pass; their users resume in one
            # loop turn, and finishing each record there held the loop 2-3 ms at 128 streams.
            # Not for a whole-body answer (embeddings): its time is already the kernel's stamp of its
            # last bytes, and 16 users checking 18-kB answers in one turn paused up to 16 times each:
            # 24 ms per request, a quarter of the requests (benchmarks/endpoint_embeddings.py).
            if check_body is None:
                yield_if_turn_is_long()
        except BaseException:  # killed while waiting for the next turn: the request is still recorded
            if on_cancel is not None:
                on_cancel(self._record(st, meta, state, detail, t0, t_end, check_body))
            raise
        rec = self._record(st, meta, state, detail, t0, t_end, check_body)
        rec.response_bytes = max(0, st.received - st.head_len)
        rec.clock_stamped = tls or st.unstamped
        if rec.t0 is None:  # a whole-body or failed request's record: its t0 for the stall check
            rec.t0 = t0
        return rec

    def _record(self, st: ResponseStream, meta: R.RequestMeta, state: str, detail: str, t0: float,
                t_end: float, check_body: BodyCheck | None = None) -> R.RequestRecord:
        code = st.code
        e2e = (t_end - t0) * 1000.0
        if check_body is not None and 200 <= code < 300 and not st.sse_body:
            if state == "complete":
                end = st.last_read if st.last_read is not None else t_end
                return check_body(st.whole_body(), meta, (end - t0) * 1000.0, code)
            if state == "timeout":
                return R.failed_record(meta, R.TIMEOUT, st.timeout_detail(), http_status=code, e2e_ms=e2e)
            why = (f"a response body over {MAX_WHOLE_BODY} bytes" if state == "error_body_cut"
                   else detail or "connection closed before the whole body")
            return R.failed_record(meta, R.PROTOCOL_ERROR, why, http_status=code, e2e_ms=e2e)
        if code and not 200 <= code < 300:
            if 300 <= code < 400:
                where = st.head.headers.get("location", "?") if st.head else "?"
                message = f"HTTP {code} redirect to {where}: llmload does not follow redirects; use the final URL"
            elif state in ("complete", "error_body_cut"):
                message = error_message(st.error_body())
            else:
                message = detail or "error response cut off"
            retry_after = st.head.headers.get("retry-after", "") if st.head is not None else ""
            return R.failed_record(meta, R.status_for_http(code), self.options.redact(message), http_status=code,
                                   e2e_ms=e2e, retry_after=retry_after)
        if code and st.sse_body is False and st.acc.bad is None:
            ctype = st.head.headers.get("content-type", "no Content-Type") if st.head else "?"
            message = error_message(st.error_body()) if st.err_body else "an empty body"
            return R.failed_record(meta, R.PROTOCOL_ERROR, self.options.redact(
                f"expected an event stream, got {ctype}: {message}"), http_status=code, e2e_ms=e2e)
        if state == "timeout":
            detail = st.timeout_detail()
        return st.acc.finish(meta, "eof" if state == "error_body_cut" else state, t_end,
                             http_status=code or None, detail=detail)

    def _read_tls(self, st: ResponseStream) -> None:
        sock = self.sock
        try:
            while st.result is None:
                sock.settimeout(max(st.deadline() - perf_counter(), 0.001))
                try:
                    data = sock.recv(RECV_SIZE)
                except TimeoutError:
                    if perf_counter() >= st.deadline():
                        st.end("timeout", st.timeout_detail())
                        return
                    continue
                st.on_data(data, perf_counter())
                if st.over_cap():
                    return
        finally:
            if self.sock is not None:
                self.sock.settimeout(None)
