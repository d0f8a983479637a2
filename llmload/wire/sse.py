"""Server-Sent Events, incrementally: bytes in any split → each event's data. Pure.

WHATWG rules as LLM servers use them: ``data:`` lines (several are joined with ``\\n``), an
optional ``event:`` name, ``:`` comments, ``id:``/``retry:`` ignored; lines end in LF, CRLF or a
lone CR; a blank line dispatches; an event whose data is empty is not dispatched (``data:``
alone is a keep-alive, not an event). Cost is linear in the bytes and memory is bounded: a line
without an end is kept as pieces and joined once, and a line or event longer than ``max_bytes``
raises :class:`SSEError` (a broken proxy can send a line that never ends).

Usage::

    decoder = SSEDecoder(max_bytes=1 << 20)
    for event in decoder.feed(b'data: {"choices":[]}\\n\\n'):
        ...   # bytes (the data), or (event_name, bytes) for an event with an ``event:`` name
"""

from __future__ import annotations

DEFAULT_MAX_BYTES = 1 << 20


class SSEError(ValueError):
    """The stream breaks a limit or cannot be SSE; the message says which."""


class SSEDecoder:
    __slots__ = ("_partial", "_partial_len", "_data", "_data_len", "_event", "max_bytes")

    def __init__(self, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self._partial: list[bytes] = []  # pieces of a line whose end has not arrived
        self._partial_len = 0
        self._data: list[bytes] | None = None  # data lines of the event being read
        self._data_len = 0
        self._event: str | None = None
        self.max_bytes = max_bytes

    def feed(self, data: bytes) -> list[bytes | tuple[str, bytes]]:
        # The usual read: exactly one single-line event, "data: ...\n\n".
        if (not self._partial and self._data is None and self._event is None and data[:6] == b"data: "
                and data[-2:] == b"\n\n" and data.find(b"\n") == len(data) - 2 and b"\r" not in data
                and len(data) > 8):
            if len(data) - 2 > self.max_bytes:  # its one line: the rule of _line, however the read was split
                raise SSEError(f"SSE line over {self.max_bytes} bytes")
            return [data[6:-2]]
        first_nl = data.find(b"\n")
        if first_nl < 0 and b"\r" not in data and not (self._partial and self._partial[-1][-1:] == b"\r"):
            self._keep(data)  # (a kept CR followed by no LF ended its line: that is read below)
            return []
        if self._partial:
            self._partial.append(data)
            data = b"".join(self._partial)
            self._partial = []
            self._partial_len = 0
        lines = data.split(b"\n")
        tail = lines.pop()
        out: list[bytes | tuple[str, bytes]] = []
        for line in lines:
            if line[-1:] == b"\r":
                line = line[:-1]
            if b"\r" in line:  # lone CRs end lines too
                for part in line.split(b"\r"):
                    self._line(part, out)
            else:
                self._line(line, out)
        if b"\r" in tail:
            # A CR at the very end may be the first half of a CRLF: keep it with the partial line.
            parts = tail.split(b"\r")
            for part in parts[:-2]:
                self._line(part, out)
            tail = parts[-2] + b"\r" if parts[-1] == b"" else parts[-1]
            if parts[-1] != b"":
                self._line(parts[-2], out)
        if tail:
            self._keep(tail)
        return out

    def _keep(self, piece: bytes) -> None:
        self._partial.append(piece)
        self._partial_len += len(piece)
        if self._partial_len > self.max_bytes + 1:  # + 1: its end may be a CRLF whose CR came first
            self._partial = []
            self._partial_len = 0
            raise SSEError(f"SSE line over {self.max_bytes} bytes without an end")

    def _line(self, line: bytes, out: list) -> None:
        if len(line) > self.max_bytes:  # any field: the same verdict as for a line still without its end
            raise SSEError(f"SSE line over {self.max_bytes} bytes")
        if not line:
            data = self._data
            if data:
                payload = data[0] if len(data) == 1 else b"\n".join(data)
                if payload:
                    out.append(payload if self._event is None else (self._event, payload))
            self._data = None
            self._data_len = 0
            self._event = None
        elif line[:5] == b"data:":
            value = line[6:] if line[5:6] == b" " else line[5:]
            self._data_len += len(value) + 1
            if self._data_len > self.max_bytes:
                self._data = None
                self._data_len = 0
                raise SSEError(f"SSE event over {self.max_bytes} bytes")
            if self._data is None:
                self._data = [value]
            else:
                self._data.append(value)
        elif line[:6] == b"event:":
            name = line[6:].strip().decode("utf-8", "replace")
            self._event = None if name in ("", "message") else name
        # ":" comments, "id:", "retry:" and unknown fields carry nothing we use

    def flush(self) -> list[bytes | tuple[str, bytes]]:
        """Events left when the stream ends without a final blank line."""
        if not self._partial and self._data is None:
            return []
        return self.feed(b"\n\n")

    @property
    def pending(self) -> bool:
        return bool(self._partial) or self._data is not None or self._event is not None
