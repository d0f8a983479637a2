"""The mock's own bounds: request head and body caps (413), chunked bodies (411), a connection cap
(503) and an idle timeout, against a real `llmload mock` process (issue 19, row 20)."""

from __future__ import annotations

import socket
import time

import pytest


def _connect(mock) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", mock.port), timeout=30)
    return s


def _answer(s: socket.socket) -> bytes:
    """Everything the server sends until it closes (each test's requests end with a close)."""
    out = b""
    while chunk := s.recv(65536):
        out += chunk
    return out


def _status(answer: bytes) -> int:
    return int(answer.split(b" ", 2)[1])


@pytest.fixture
def mock(mock_factory):
    return mock_factory("--profile", "fixed", "--max-connections", "3", "--idle-timeout", "1")


def test_a_head_over_64_kib_is_413(mock):
    with _connect(mock) as s:
        s.sendall(b"GET /health HTTP/1.1\r\nX-Big: " + b"a" * (70 * 1024))
        assert _status(_answer(s)) == 413


def test_a_body_over_64_mib_is_413_before_it_is_sent(mock):
    with _connect(mock) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nContent-Length: 100000000\r\n\r\n")
        assert _status(_answer(s)) == 413


def test_a_chunked_body_is_411(mock):
    with _connect(mock) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
        assert _status(_answer(s)) == 411


def test_a_large_body_in_small_reads_is_read_whole(mock):
    body = b"x" * (24 << 20)  # not JSON: the answer is 400, after the whole body was read
    with _connect(mock) as s:
        s.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nConnection: close\r\nContent-Length: %d\r\n\r\n"
                  % len(body))
        view = memoryview(body)
        for i in range(0, len(body), 16384):
            s.sendall(view[i:i + 16384])
        assert _status(_answer(s)) == 400


def test_connections_past_the_cap_get_503(mock):
    held = [_connect(mock) for _ in range(3)]
    try:
        for s in held:  # each is served: a request on it answers
            s.sendall(b"GET /health HTTP/1.1\r\n\r\n")
            assert s.recv(65536).startswith(b"HTTP/1.1 200")
        with _connect(mock) as extra:
            answer = _answer(extra)
        assert _status(answer) == 503 and b"--max-connections" in answer
    finally:
        for s in held:
            s.close()


def test_an_idle_connection_is_closed(mock):
    with _connect(mock) as s:
        start = time.monotonic()
        assert s.recv(1) == b""  # closed by the server, with no request sent
        assert time.monotonic() - start < 25
