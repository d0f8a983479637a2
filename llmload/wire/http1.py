"""HTTP/1.1 response framing, pure: the head, then the body (chunked, Content-Length or to EOF).

Written by hand rather than using geventhttpclient's parser because it sits on the hot path:
feeding that parser costs a Python wrapper call, a C parse and a Python ``on_body`` callback
per chunk, plus a copy out of its buffer. Here one received SSE event is usually exactly one
HTTP chunk, which :meth:`BodyDecoder.feed` recognises and slices in a few operations
(benchmarks/client_overhead.py measures the whole path). Anything unusual takes the general
state machine, which handles chunk extensions, chunks split across reads and trailers.

Usage::

    head = parse_head(raw_until_blank_line)     # -> ResponseHead, or raises HTTPError
    body = BodyDecoder(head)
    data, done = body.feed(received_bytes)
"""

from __future__ import annotations

from dataclasses import dataclass


class HTTPError(ValueError):
    """The response is not valid HTTP/1.x."""


@dataclass(slots=True)
class ResponseHead:
    status: int
    reason: str
    version: str
    headers: dict[str, str]  # lower-case names; repeated headers joined with ", "

    @property
    def chunked(self) -> bool:
        return "chunked" in self.headers.get("transfer-encoding", "").lower()

    @property
    def content_length(self) -> int | None:
        value = self.headers.get("content-length")
        if value is None or self.chunked:
            return None
        # Repeated headers are joined with ", ": the same length twice ("5, 5", a proxy that added its own)
        # is that length (RFC 9112 6.3); two different ones are an error
        values = {v.strip() for v in value.split(",")}
        try:
            n = int(values.pop()) if len(values) == 1 else -1
        except ValueError:
            raise HTTPError(f"bad Content-Length {value!r}") from None
        if n < 0:
            raise HTTPError(f"bad Content-Length {value!r}")
        return n

    @property
    def keep_alive(self) -> bool:
        return keeps_alive(self.version, self.headers)


def keeps_alive(version: str, headers: dict[str, str]) -> bool:
    """Whether a message leaves its connection open (RFC 9112, 9.3): HTTP/1.1 unless ``Connection:
    close``, HTTP/1.0 only with ``Connection: keep-alive``. ``headers``: lower-case names. The client's
    answers and the mock's requests are judged the same way."""
    conn = headers.get("connection", "").lower()
    if version == "HTTP/1.0":
        return "keep-alive" in conn
    return "close" not in conn


HEAD_END = b"\r\n\r\n"
MAX_HEAD = 64 * 1024
MAX_LINE = 4096  # a chunk size line (with its extensions) or a trailer line


def parse_head(raw: bytes) -> ResponseHead:
    """Parse a status line and headers (``raw`` without the blank line that ends them)."""
    try:
        text = raw.decode("latin-1")
    except UnicodeDecodeError as e:  # pragma: no cover - latin-1 decodes anything
        raise HTTPError(str(e)) from None
    lines = text.split("\r\n")
    parts = lines[0].split(" ", 2)
    # three ASCII digits (RFC 9110 15): str.isdigit() also takes "²" and 10**400, which int() or a msgpack'd row cannot
    if len(parts) < 2 or not parts[0].startswith("HTTP/1.") or len(parts[1]) != 3 or not parts[1].isascii() \
            or not parts[1].isdigit():
        raise HTTPError(f"bad status line {lines[0][:80]!r}")
    headers: dict[str, str] = {}
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if not sep or not name or name != name.strip():
            raise HTTPError(f"bad header line {line[:80]!r}")
        key = name.lower()
        value = value.strip()
        headers[key] = f"{headers[key]}, {value}" if key in headers else value
    return ResponseHead(int(parts[1]), parts[2] if len(parts) > 2 else "", parts[0], headers)


class BodyDecoder:
    """Turns received bytes into body bytes; ``feed`` returns ``(body, done)``.

    ``done`` is True once the message is complete (last chunk and trailers, Content-Length
    reached); bytes after the end of the message are an error (the server may not send any).
    For a body delimited by the connection closing, ``done`` comes from the caller at EOF.
    """

    __slots__ = ("chunked", "left", "_buf", "_state", "done", "_until_close")

    # states of the chunked machine
    _SIZE, _DATA, _DATA_END, _TRAILER = 0, 1, 2, 3

    def __init__(self, head: ResponseHead, request_method: str = "POST") -> None:
        self.chunked = head.chunked
        self._buf = b""
        self._state = self._SIZE
        self.done = False
        self._until_close = False
        if head.status in (204, 304) or 100 <= head.status < 200 or request_method == "HEAD":
            self.left = 0
            self.done = True
        elif self.chunked:
            self.left = 0
        else:
            n = head.content_length
            if n is None:
                self._until_close = True
                self.left = -1
            else:
                self.left = n
                self.done = n == 0

    @property
    def idle(self) -> bool:
        """Between chunks, nothing buffered: the next read starts with a chunk size line."""
        return self.chunked and not self._buf and self._state == self._SIZE and not self.done

    @property
    def until_close(self) -> bool:
        return self._until_close

    def feed(self, data: bytes) -> tuple[bytes, bool]:
        if self.done:
            if data:
                raise HTTPError("bytes after the end of the response")
            return b"", True
        if not self.chunked:
            if self._until_close:
                return data, False
            if len(data) > self.left:
                raise HTTPError("more body bytes than Content-Length")
            self.left -= len(data)
            self.done = self.left == 0
            return data, self.done
        if not self._buf and self._state == self._SIZE:
            # Fast path: exactly one whole chunk, "SIZE\r\nDATA\r\n".
            i = data.find(b"\r\n")
            if 0 < i <= 16:
                try:
                    size = int(data[:i], 16)
                except ValueError:
                    size = -1
                if size > 0 and len(data) == i + 4 + size and data[-2:] == b"\r\n":
                    return data[i + 2:-2], False
        return self._feed_general(data)

    def _feed_general(self, data: bytes) -> tuple[bytes, bool]:
        buf = self._buf + data if self._buf else data
        out = []
        pos = 0
        n = len(buf)
        while pos < n and not self.done:
            st = self._state
            if st == self._DATA:
                take = min(self.left, n - pos)
                out.append(buf[pos:pos + take])
                pos += take
                self.left -= take
                if self.left == 0:
                    self._state = self._DATA_END
            elif st == self._DATA_END:
                if n - pos < 2:
                    break
                if buf[pos:pos + 2] != b"\r\n":
                    raise HTTPError("chunk data not followed by CRLF")
                pos += 2
                self._state = self._SIZE
            else:  # _SIZE or _TRAILER: line-based
                eol = buf.find(b"\r\n", pos)
                if (eol if eol >= 0 else n) - pos > MAX_LINE:  # the same verdict however the line was split
                    raise HTTPError("chunk size line too long")
                if eol < 0:
                    break
                line = buf[pos:eol]
                pos = eol + 2
                if st == self._SIZE:
                    size_text = line.split(b";", 1)[0].strip()
                    try:
                        size = int(size_text, 16)
                    except ValueError:
                        raise HTTPError(f"bad chunk size {size_text[:20]!r}") from None
                    if size < 0:
                        raise HTTPError(f"bad chunk size {size_text[:20]!r}")
                    if size == 0:
                        self._state = self._TRAILER
                    else:
                        self.left = size
                        self._state = self._DATA
                elif not line:  # the blank line after the (usually absent) trailers
                    self.done = True
        rest = buf[pos:]
        if self.done and rest:
            raise HTTPError("bytes after the end of the response")
        self._buf = rest
        return b"".join(out), self.done
