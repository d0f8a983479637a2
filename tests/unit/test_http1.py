"""HTTP/1.1 response framing: heads, chunked bodies split anywhere, lengths, errors."""

from __future__ import annotations

import pytest

from llmload.wire.http1 import BodyDecoder, HTTPError, parse_head

HEAD = b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nTransfer-Encoding: chunked"


def chunked(*parts: bytes, ext: bool = False, trailers: bytes = b"") -> bytes:
    out = b""
    for p in parts:
        out += b"%x%s\r\n%s\r\n" % (len(p), b";x=1" if ext else b"", p)
    return out + b"0\r\n" + trailers + b"\r\n"


def test_head_parsing():
    h = parse_head(HEAD + b"\r\nX-A: 1\r\nx-a: 2")
    assert h.status == 200 and h.chunked and h.keep_alive and h.headers["x-a"] == "1, 2"
    h = parse_head(b"HTTP/1.0 429 Too Many Requests\r\nContent-Length: 5")
    assert h.status == 429 and h.content_length == 5 and not h.keep_alive
    assert not parse_head(b"HTTP/1.1 200 OK\r\nConnection: close").keep_alive
    for bad in (b"HTTP/2 200", b"garbage", b"HTTP/1.1 abc OK", b"HTTP/1.1 200 OK\r\nno colon",
                b"HTTP/1.1 " + b"9" * 30 + b" OK", "HTTP/1.1 2\u00b2\u00b3 OK".encode("latin-1"), b"HTTP/1.1 20 OK"):
        with pytest.raises(HTTPError):
            parse_head(bad)


@pytest.mark.parametrize("step", [1, 2, 3, 5, 13, 1000])
@pytest.mark.parametrize("ext", [False, True])
def test_chunked_body_split_at_any_point(step, ext):
    body = chunked(b"data: a\n\n", b"data: bb\n\n", b"x" * 300, ext=ext, trailers=b"X-T: 1\r\n")
    dec = BodyDecoder(parse_head(HEAD))
    out, done = b"", False
    for i in range(0, len(body), step):
        part, done = dec.feed(body[i:i + step])
        out += part
    assert done and out == b"data: a\n\ndata: bb\n\n" + b"x" * 300


def test_fast_path_and_idle_state():
    dec = BodyDecoder(parse_head(HEAD))
    assert dec.idle
    assert dec.feed(b"9\r\ndata: a\n\n\r\n") == (b"data: a\n\n", False)
    assert dec.idle
    assert dec.feed(b"0\r\n\r\n") == (b"", True)


def test_content_length_and_until_close():
    dec = BodyDecoder(parse_head(b"HTTP/1.1 400 Bad\r\nContent-Length: 4"))
    assert dec.feed(b"ab") == (b"ab", False)
    assert dec.feed(b"cd") == (b"cd", True)
    with pytest.raises(HTTPError):
        BodyDecoder(parse_head(b"HTTP/1.1 400 Bad\r\nContent-Length: 1")).feed(b"ab")
    dec = BodyDecoder(parse_head(b"HTTP/1.0 200 OK"))
    assert dec.until_close and dec.feed(b"abc") == (b"abc", False)
    assert BodyDecoder(parse_head(b"HTTP/1.1 204 No Content")).done


def test_bad_chunk_framing():
    with pytest.raises(HTTPError):
        BodyDecoder(parse_head(HEAD)).feed(b"zz\r\nabc\r\n")
    with pytest.raises(HTTPError):
        BodyDecoder(parse_head(HEAD)).feed(b"3\r\nabcXX")
    dec = BodyDecoder(parse_head(HEAD))
    dec.feed(b"0\r\n\r\n")
    with pytest.raises(HTTPError):
        dec.feed(b"more")
