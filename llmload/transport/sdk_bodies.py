"""Bounded bodies for the openai-SDK transport: what the fast transport's limits are, for httpx.

The SDK reads a whole non-2xx body before it raises, and the whole ``models.list()`` answer, and
httpx inflates gzip in one call per network read. :func:`cap_body` (an httpx response hook) gives
every response that is not a 2xx event stream a body of at most ``MAX_ERROR_BODY`` bytes, inflated
here in bounded slices (wire/inflate.py); the event stream itself is read raw and inflated by
:func:`inflated_reads`, so both transports apply one set of limits.

Usage::

    httpx.Client(event_hooks={"response": [cap_body]})
    for data in inflated_reads(response.iter_raw(), inflater):   # inflater None: identity
        ...
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from typing import Any

from llmload.transport.stream import MAX_ERROR_BODY
from llmload.wire.inflate import ENCODINGS, InflateError, Inflater

try:  # the SDK's HTTP client (httpx, or the fork the openai SDK ships with)
    from httpx2 import SyncByteStream
except ImportError:  # pragma: no cover - depends on the installed SDK
    from httpx import SyncByteStream


class CappedBody(SyncByteStream):
    """At most ``limit`` bytes of a body, inflated here when ``encoding`` is gzip/deflate (any
    other encoding gives no bytes: the server was asked for ``identity``)."""

    def __init__(self, inner: Any, encoding: str, limit: int = MAX_ERROR_BODY) -> None:
        self.inner = inner
        self.encoding = encoding
        self.limit = limit

    def __iter__(self) -> Iterator[bytes]:
        identity = self.encoding in ("", "identity")
        if not identity and self.encoding not in ENCODINGS:
            return
        inflater = None if identity else Inflater(self.encoding, self.limit)
        left = self.limit
        try:
            for raw in self.inner:
                for piece in (raw,) if inflater is None else inflater.slices(raw):
                    yield piece[:left]
                    left -= len(piece)
                    if left <= 0:
                        return  # enough to say what went wrong; the rest is not read
        except InflateError:
            return

    def close(self) -> None:
        self.inner.close()


def cap_body(response: Any) -> None:
    """httpx response hook: every body but a 2xx event stream is capped (see the module docstring)."""
    if 200 <= response.status_code < 300 and "event-stream" in response.headers.get("content-type", "").lower():
        return
    encoding = response.headers.get("content-encoding", "identity").lower().strip()
    if "content-encoding" in response.headers:
        del response.headers["content-encoding"]  # decoded here: httpx must not decode it again
    response.stream = CappedBody(response.stream, encoding)


def inflater_for(encoding: str, max_event_bytes: int) -> Inflater | None:
    """The event stream's inflater (None for identity); raises InflateError for an encoding llmload cannot read."""
    encoding = encoding.lower().strip()
    if encoding in ("", "identity"):
        return None
    if encoding not in ENCODINGS:
        raise InflateError(f"unsupported Content-Encoding {encoding!r} (llmload sends Accept-Encoding: identity)")
    return Inflater(encoding, max_event_bytes)


def inflated_reads(raw_reads: Iterable[bytes], inflater: Inflater | None) -> Iterator[bytes]:
    """The body's bytes as they arrive; compressed reads in bounded slices. Raises InflateError."""
    if inflater is None:
        yield from raw_reads
        return
    for raw in raw_reads:
        yield from inflater.slices(raw)
