"""A gzip/deflate body inflated in bounded slices, so no server can make one read cost a
gigabyte. Pure.

llmload asks for ``Accept-Encoding: identity``; some servers and proxies compress anyway. A
compressed read inflates by up to ~1000x (a "gzip bomb": 64 KiB of gzip can be 64 MiB of SSE
comments), so :class:`Inflater` never inflates more than ``SLICE`` bytes per call to zlib and
counts what it gives against ``--max-event-bytes`` (``max_bytes``):

* per read: one compressed read may inflate to at most ``2 × max_bytes``; a legitimate stream
  inflates 3-20x, and a read that holds 64 KiB of compressed events is a client far behind;
* per event: at most ``2 × max_bytes`` may be inflated between two output events (what the caller
  reports with :meth:`Inflater.output_seen`): one event is at most ``max_bytes``, and SSE comments
  and keep-alives are a few bytes each, so more is a server that inflates without saying anything.

Either raises :class:`InflateError`, which the transports turn into ``protocol_error``.

Usage::

    inflater = Inflater("gzip", max_bytes=1 << 20)
    for piece in inflater.slices(compressed_read):   # each piece at most SLICE bytes
        feed(piece)
    inflater.output_seen()                           # an output event arrived: the per-event budget restarts
"""

from __future__ import annotations

import zlib
from collections.abc import Iterator

SLICE = 64 * 1024  # bytes of output per call to zlib: what one read of an uncompressed body can hold
ENCODINGS = ("gzip", "x-gzip", "deflate")


class InflateError(ValueError):
    """The compressed body inflates past a limit, or is not valid gzip/deflate; the message says which."""


class Inflater:
    """Inflates one response body read by read; see the module docstring."""

    __slots__ = ("encoding", "max_bytes", "since_output", "_zlib")

    def __init__(self, encoding: str, max_bytes: int) -> None:
        self.encoding = encoding
        self.max_bytes = max_bytes
        self.since_output = 0  # bytes inflated since the last output event
        self._zlib = zlib.decompressobj(zlib.MAX_WBITS | 32)  # a gzip or a zlib header, detected

    def output_seen(self) -> None:
        self.since_output = 0

    def slices(self, data: bytes) -> Iterator[bytes]:
        """The inflated bytes of one compressed read, in pieces of at most ``SLICE`` bytes."""
        limit = 2 * self.max_bytes
        z = self._zlib
        read_total = 0
        while data or not z.eof:
            try:
                piece = z.decompress(data, SLICE)
            except zlib.error as e:
                raise InflateError(f"cannot decode the {self.encoding} body: {e}") from None
            data = z.unconsumed_tail
            if not piece and not data:
                return  # all of this read is inflated (a full slice may leave more inside zlib: asked again)
            n = len(piece)
            read_total += n
            self.since_output += n
            if read_total > limit:
                raise InflateError(f"one read of the {self.encoding} body inflates past {limit} bytes "
                                   f"(2 x --max-event-bytes): a compression bomb?")
            if self.since_output > limit:
                raise InflateError(f"the {self.encoding} body inflated {self.since_output} bytes without an "
                                   f"output event (over 2 x --max-event-bytes)")
            if piece:
                yield piece
            elif z.eof:
                return  # bytes after the end of the compressed stream mean nothing
