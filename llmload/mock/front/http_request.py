"""HTTP/1.1 request framing for the mock, pure: bytes in, one whole request (or "not yet") out.

The shape of :mod:`llmload.wire.http1` on the client side: a pure function over a buffer, testable
without a socket and with the bytes split anywhere. Bodies are Content-Length framed (clients
of an LLM API send JSON with a length); chunked request bodies are refused with 411.

Usage::

    req, n = parse_request(buf)     # (HTTPRequest, bytes used) once buf holds a whole request
    if req is None:                 # (None, wanted): read more; wanted = total bytes needed, 0 if unknown
        ...
"""

from __future__ import annotations

from dataclasses import dataclass

from llmload.wire.http1 import HEAD_END, MAX_HEAD, keeps_alive  # a head's end and bound, as the client reads them

MAX_BODY = 64 * 1024 * 1024


class RequestError(ValueError):
    """A request the server answers with ``status`` and then closes the connection."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status
        self.message = message


@dataclass(slots=True)
class HTTPRequest:
    method: str
    target: str
    version: str
    headers: dict[str, str]  # lower-case names; the last of repeated headers wins
    body: bytes

    @property
    def path(self) -> str:
        return self.target.split("?", 1)[0]

    @property
    def keep_alive(self) -> bool:
        return keeps_alive(self.version, self.headers)


def parse_request(buf: bytes | bytearray) -> tuple[HTTPRequest | None, int]:
    """The first whole request in ``buf`` and how many bytes it took, or ``(None, wanted)``.
    Raises :class:`RequestError` for a request that can never be valid."""
    head_end = buf.find(HEAD_END)
    if head_end < 0:
        if len(buf) > MAX_HEAD:
            raise RequestError(413, "request head too large")
        return None, 0
    lines = buf[:head_end].decode("latin-1").split("\r\n")
    parts = lines[0].split()
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise RequestError(400, "malformed request line")
    method, target, version = parts
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise RequestError(400, f"malformed header line {line[:60]!r}")
        headers[name.strip().lower()] = value.strip()
    if "chunked" in headers.get("transfer-encoding", "").lower():
        raise RequestError(411, "chunked request bodies are not supported")
    try:
        length = int(headers.get("content-length", "0"))
    except ValueError:
        length = -1
    if not 0 <= length <= MAX_BODY:
        raise RequestError(400 if length < 0 else 413, "bad Content-Length")
    total = head_end + len(HEAD_END) + length
    if len(buf) < total:
        return None, total
    return HTTPRequest(method, target, version, headers, bytes(buf[head_end + len(HEAD_END):total])), total
