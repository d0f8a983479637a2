"""The fast transport: one keep-alive connection per user, streams read by the process's one reader.

Timing rules from ../shared/HOTPATH.md: nothing that can yield sits between t0 and the write (the
connection is checked and opened before t0), and every response is read to the end of the HTTP
message so the connection is reused instead of reconnecting inside the next request's TTFT. TLS
connections use the same parsing, read from the user greenlet, stamped on arrival.

Usage::

    t = FastTransport("http://127.0.0.1:8000", "/v1/chat/completions", timeout=60)
    t.connect()                       # in on_start: the first request pays no TCP connect
    rec = t.stream(body_bytes, meta)  # -> RequestRecord
"""

from __future__ import annotations

import socket
import ssl
import time
from collections.abc import Callable
from time import perf_counter

import gevent
import gevent.socket
from gevent.hub import Waiter

from llmload import netstamp
from llmload import record as R
from llmload.limits import explain_connect_error
from llmload.protocol import classify_event, error_message
from llmload.transport.reader import reader as process_reader
from llmload.transport.stream import RECV_SIZE, ResponseStream
from llmload.transport.target import Target


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
            if not self._tls:
                netstamp.enable(sock)  # without kernel timestamps reads are stamped on arrival instead
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
                                           f"{self.target.host}:{self.target.port}: {explain_connect_error(e)}",
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
        reader = None if tls else process_reader()
        waiter = None if tls else Waiter()
        acc = R.StreamAccumulator(0.0, want_text)
        st = ResponseStream(None if tls else sock._sock, acc, self.timeout, waiter, reader)
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
        if code and code != 200:
            retry_after = st.head.headers.get("retry-after", "") if st.head is not None else ""
            message = error_message(b"".join(st.err_body)) if state == "complete" else (
                detail or "error response cut off")
            return R.failed_record(meta, R.status_for_http(code), message, http_status=code,
                                   e2e_ms=(t_end - t0) * 1000.0, retry_after=retry_after)
        return acc.finish(meta, state, t_end, http_status=code or None, detail=detail)

    def _read_tls(self, st: ResponseStream) -> None:
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
