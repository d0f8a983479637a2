"""Tiny HTTP endpoints for the scraper's tests, on free ports of 127.0.0.1, served by greenlets of
the (gevent-patched) test process: a canned body, one that never answers, one that drips a huge
body, and one that counts who asked.

Usage::

    with static_endpoint({"/metrics": body}) as ep:      # ep.url, ep.hits: [(path, user agent)]
        ...
    with dead_endpoint() as url: ...                     # accepts connections, never answers
    with dripping_endpoint(total=10 << 20) as ep: ...    # ep.sent: bytes sent per connection
"""

from __future__ import annotations

import contextlib
import socket
from collections.abc import Iterator
from dataclasses import dataclass, field

import gevent
from gevent.server import StreamServer


def read_head(sock: socket.socket, limit: float = 5.0) -> tuple[str, dict[str, str]] | None:
    """The request line's path and the headers of one HTTP request (bounded in time)."""
    buf = b""
    with gevent.Timeout(limit, False):
        while b"\r\n\r\n" not in buf:
            data = sock.recv(4096)
            if not data:
                return None
            buf += data
        lines = buf.split(b"\r\n\r\n", 1)[0].decode("latin-1").split("\r\n")
        path = lines[0].split(" ")[1]
        return path, {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:] if ":" in ln)}
    return None


@dataclass
class Endpoint:
    url: str
    hits: list[tuple[str, str]] = field(default_factory=list)
    sent: list[int] = field(default_factory=list)


@contextlib.contextmanager
def _serving(handler) -> Iterator[StreamServer]:
    server = StreamServer(("127.0.0.1", 0), handler)
    server.start()
    try:
        yield server
    finally:
        server.stop(timeout=1)


@contextlib.contextmanager
def static_endpoint(routes: dict[str, bytes], content_type: str = "text/plain; version=0.0.4") -> Iterator[Endpoint]:
    """Each path answers its body (200); any other path 404."""
    ep = Endpoint("")

    def handle(sock: socket.socket, _addr) -> None:
        head = read_head(sock)
        if head is None:
            return
        path, headers = head
        ep.hits.append((path, headers.get("user-agent", "")))
        body = routes.get(path)
        status = "200 OK" if body is not None else "404 Not Found"
        body = body if body is not None else b"not found\n"
        sock.sendall(f"HTTP/1.1 {status}\r\nContent-Type: {content_type}\r\nContent-Length: {len(body)}\r\n"
                     f"Connection: close\r\n\r\n".encode() + body)

    with _serving(handle) as server:
        ep.url = f"http://127.0.0.1:{server.server_port}"
        yield ep


@contextlib.contextmanager
def dead_endpoint() -> Iterator[str]:
    """A port whose connections the kernel completes (backlog) but that never reads nor answers."""
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    s.listen(128)
    try:
        yield f"http://127.0.0.1:{s.getsockname()[1]}/metrics"
    finally:
        s.close()


@contextlib.contextmanager
def dripping_endpoint(total: int, chunk: int = 256 << 10, pause_s: float = 0.05,
                      content_length: bool = False) -> Iterator[Endpoint]:
    """A 200 whose body (valid Prometheus lines) comes ``chunk`` bytes every ``pause_s`` until
    ``total`` bytes or the client hangs up; no Content-Length unless asked."""
    line = b'huge_metric{i="0123456789"} 1\n'
    piece = line * (chunk // len(line))
    ep = Endpoint("")

    def handle(sock: socket.socket, _addr) -> None:
        head = read_head(sock)
        if head is None:
            return
        ep.hits.append((head[0], head[1].get("user-agent", "")))
        length = f"Content-Length: {total}\r\n" if content_length else ""
        sent = 0
        try:
            sock.sendall(f"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\n{length}Connection: close\r\n\r\n".encode())
            while sent < total:
                sock.sendall(piece[: total - sent])
                sent += min(len(piece), total - sent)
                gevent.sleep(pause_s)
        except OSError:
            pass  # the client stopped reading: that is the point
        ep.sent.append(sent)

    with _serving(handle) as server:
        ep.url = f"http://127.0.0.1:{server.server_port}/metrics"
        yield ep
