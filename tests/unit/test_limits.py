"""The client's bounds against a hostile server, as pure functions: the inflater's slices and
limits, the output-event cap tied to max_tokens, and which deadline a timeout names."""

from __future__ import annotations

import gzip
import zlib

import pytest

from llmload.metrics.record import RequestMeta, StreamAccumulator
from llmload.transport.deadlines import NO_MAX_TOKENS_EVENTS, Deadlines, output_event_cap
from llmload.transport.stream import ResponseStream
from llmload.wire.inflate import SLICE, InflateError, Inflater

MIB = 1 << 20


def test_a_compressed_read_is_inflated_in_slices_and_gives_the_same_bytes():
    body = b"".join(b'data: {"choices":[{"delta":{"content":"%d"}}]}\n\n' % i for i in range(20000))
    packed = gzip.compress(body)
    inflater = Inflater("gzip", MIB)
    pieces = []
    for i in range(0, len(packed), 1000):
        for piece in inflater.slices(packed[i:i + 1000]):
            assert 0 < len(piece) <= SLICE
            pieces.append(piece)
            inflater.output_seen()
    assert b"".join(pieces) == body
    deflated = zlib.compress(body)  # "deflate" as servers send it: a zlib header
    assert b"".join(Inflater("deflate", MIB).slices(deflated)) == body


def test_one_read_may_not_inflate_past_twice_the_event_limit():
    bomb = gzip.compress(b":" + b"z" * (8 * MIB) + b"\n")
    inflater = Inflater("gzip", MIB)
    got = 0
    with pytest.raises(InflateError, match=r"one read of the gzip body inflates past 2097152 bytes"):
        for piece in inflater.slices(bomb):
            got += len(piece)
            inflater.output_seen()  # even with output: one read is bounded
    assert got <= 2 * MIB


def test_reads_may_not_inflate_past_twice_the_event_limit_without_an_output_event():
    packed = gzip.compress(b": keep-alive\n" * 200_000)  # 2.6 MB of comments
    inflater = Inflater("gzip", MIB)
    with pytest.raises(InflateError, match="inflated 2[0-9]{6} bytes without an output event"):
        for i in range(0, len(packed), 100):
            list(inflater.slices(packed[i:i + 100]))
    again = Inflater("gzip", MIB)  # the same bytes with an output event now and then pass
    for i in range(0, len(packed), 100):
        list(again.slices(packed[i:i + 100]))
        again.output_seen()


def test_a_broken_gzip_body_names_its_encoding():
    with pytest.raises(InflateError, match="cannot decode the gzip body"):
        list(Inflater("gzip", MIB).slices(b"\x1f\x8bnot gzip at all"))


def test_the_output_event_cap_is_tied_to_max_tokens_with_room_for_reasoning():
    assert output_event_cap(8) == 8 + 8192 and output_event_cap(100_000) == 200_016
    assert output_event_cap(None) == output_event_cap(0) == NO_MAX_TOKENS_EVENTS


def _stream(max_tokens, deadlines=None):
    acc = StreamAccumulator(100.0)
    return ResponseStream(None, acc, deadlines or Deadlines(5, 5), waiter=None, reader=None, max_tokens=max_tokens)


def test_a_stream_past_its_event_cap_ends_as_a_protocol_error():
    st = _stream(1)
    st.acc.times.extend([100.0 + i * 1e-3 for i in range(output_event_cap(1))])
    assert not st.over_cap() and st.result is None  # at the cap: still fine
    st.acc.times.append(200.0)
    assert st.over_cap() and st.result[0] == "eof"
    rec = st.acc.finish(RequestMeta("r", 0.0, "s", max_tokens=1), st.result[0], st.result[2])
    assert rec.status == "protocol_error"
    assert rec.error == f"server ignored max_tokens: more than {output_event_cap(1)} output events for max_tokens=1"


def test_the_request_deadline_comes_first_when_it_is_earlier_and_is_named():
    st = _stream(8, Deadlines(first_token=10, idle=10, request=3))
    assert st.deadline() == 103.0 and st.timeout_detail() == "the request took longer than --request-deadline 3 s"
    st.acc.times.append(101.0)
    assert st.deadline() == 103.0
    late = _stream(8, Deadlines(first_token=1, idle=1, request=30))
    assert late.deadline() == 101.0 and late.timeout_detail() == "no first token within 1 s"
    late.acc.times.append(100.5)
    assert late.deadline() == 101.5 and late.timeout_detail() == "no output event for 1 s"
    assert _stream(8).deadline() == 105.0  # no request deadline: as before


def test_a_read_that_fills_its_last_slice_leaves_nothing_inside_zlib():
    """Found by the fuzz tier: the last slice of a read came out exactly full, the rest of that read's
    output waited inside zlib, and a body split there lost it (the whole body did not)."""
    body = bytes.fromhex(
        '1f8b0800000000000003edc6310d00300800b01f15e8c00d091238903f1d4bdaabd3db951731222222222222222222222222'
        '2222222222222222222222222222222222222222222222222222222222222222222222222222222222222222222222222222'
        '2222222222222222222222222222222222222222222222222222222222222222222222222222222222222222222222222222'
        '2222222222222222222222222222222222222222222222222222222222222222222222222222222222222222222222222222'
        '2222222222222222222222222222222222222222222222222222222222222222222222222222222222222222222222222222'
        '2222222222222222222222222222222222222222222222222222222222222222222222222222222222222222222222222222'
        '222222222222222222222222222222222222222222222222222222222222222222222222222222')
    def inflate(parts):
        inf = Inflater("gzip", max_bytes=1 << 20)
        out = b""
        for part in parts:
            for piece in inf.slices(part):
                out += piece
                inf.output_seen()
        return out
    whole = inflate([body])
    assert len(whole) == 155_326 and inflate([body[:211], body[211:]]) == whole
