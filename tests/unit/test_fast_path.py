"""The fast transport's inlined byte test (transport/stream.py, ResponseStream.on_readable) gives the
general path's answer: a read whose chunk has a second choice that only finishes is parsed, so its
finish reason is not lost (found by the fuzz tier on chunks.is_plain, whose test the inlined copy
repeats). Real reads through a socketpair."""

from __future__ import annotations

import json
import socket
from time import perf_counter

import pytest

from llmload.metrics.record import StreamAccumulator
from llmload.transport.stream import Deadlines, ResponseStream

pytestmark = pytest.mark.unit

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked\r\n\r\n"


def _chunk(obj) -> bytes:
    event = b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n"
    return b"%x\r\n%s\r\n" % (len(event), event)


def _read(stream: ResponseStream, sender: socket.socket, data: bytes) -> None:
    sender.sendall(data)
    stream.on_readable(0.0, 0.0)


def test_the_inlined_byte_test_leaves_a_finishing_second_choice_to_the_parse():
    a, b = socket.socketpair()
    try:
        acc = StreamAccumulator(perf_counter())
        stream = ResponseStream(a, acc, Deadlines(5, 5), waiter=None, reader=None, max_tokens=8)
        _read(stream, b, HEAD + _chunk({"choices": [{"index": 0, "delta": {"content": "Hi"}, "finish_reason": None}]}))
        assert stream.plain  # the next single-chunk read may take the inlined path
        _read(stream, b, _chunk({"choices": [{"index": 0, "delta": {"content": " there"}, "finish_reason": None}]}))
        assert len(acc.times) == 2 and acc.finish_reason is None  # a plain delta: taken from its bytes
        _read(stream, b, _chunk({"choices": [{"index": 0, "delta": {"content": "!"}, "finish_reason": None},
                                             {"index": 1, "finish_reason": "stop"}]}))
        assert len(acc.times) == 3 and acc.finish_reason == "stop"
    finally:
        a.close()
        b.close()
