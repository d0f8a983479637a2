"""A server that answers each request with exact bytes from a script: hostile and odd wires.

Runs in its own process (so a test can stall its client's event loop while the server keeps
writing), on 127.0.0.1 and a free port. A request names its script with ``X-Script: NAME``; a
script is a list of steps: ``("send", bytes)``, ``("sleep", seconds)``, ``("close",)``. The server
logs, per request, the request head it got and when each ``send`` left (``time.perf_counter()``,
the clock the client stamps with on this machine).

Usage::

    proc, url = start_process(log_path)      # from a test
    # client sends X-Script: keepalive_no_token ...
    entries = read_log(log_path)
"""

from __future__ import annotations

import gzip
import json
import socket
import subprocess
import sys
import threading
import time
import zlib

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def chunk(data: bytes, ext: bytes = b"") -> bytes:
    return b"%x%s\r\n%s\r\n" % (len(data), ext, data)


def content(text: str, finish: str | None = None) -> bytes:
    f = "null" if finish is None else json.dumps(finish)
    return (b'data: {"id":"c","object":"chat.completion.chunk","choices":[{"index":0,"delta":{"content":'
            + json.dumps(text).encode() + b'},"logprobs":null,"finish_reason":' + f.encode() + b"}]}\n\n")


USAGE = (b'data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{"prompt_tokens":5,'
         b'"completion_tokens":3,"total_tokens":8}}\n\n')
DONE = b"data: [DONE]\n\n"
END = b"0\r\n\r\n"


def stream(*events: bytes) -> bytes:
    return HEAD + b"".join(chunk(e) for e in events) + END


def paced(events: list[bytes], gap: float) -> list[tuple]:
    """One chunk per event, ``gap`` seconds apart, then the end of the message."""
    steps: list[tuple] = [("send", HEAD)]
    for e in events:
        steps += [("send", chunk(e)), ("sleep", gap)]
    return steps + [("send", END)]


def _gzip_stream() -> bytes:
    body = gzip.compress(content("a") + content("b") + content("c", "stop") + USAGE + DONE)
    return (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-encoding: gzip\r\n"
            b"content-length: %d\r\n\r\n" % len(body) + body)


def _gzip_bomb(head: bytes, first: bytes, unit: bytes, total: int = 1 << 30):
    """A chunked gzip body of ``first`` + ``unit`` repeated to ``total`` bytes, compressed as it is
    sent (1 GiB inflates from ~1 MiB of gzip; nothing big is ever held). Stops when the client hangs up."""
    z = zlib.compressobj(6, zlib.DEFLATED, 31)
    block = unit * ((1 << 20) // len(unit))
    yield head + chunk(z.compress(first))
    for _ in range(total // len(block)):
        out = z.compress(block)
        if out:
            yield chunk(out)
    yield chunk(z.flush()) + END


GZIP_HEAD = b"HTTP/1.1 %s\r\ncontent-type: %s\r\ncontent-encoding: gzip\r\ntransfer-encoding: chunked\r\n\r\n"


def _endless_tokens():
    """Content events as fast as the client reads them, never a finish_reason (a server that
    ignores max_tokens); at most 10 million events or 60 s."""
    batch = b"".join(chunk(content("x")) for _ in range(200))
    yield HEAD
    t_end = time.monotonic() + 60
    for _ in range(50_000):
        yield batch
        if time.monotonic() > t_end:
            break
    yield END


# usage values no table can hold, sent in turn with good ones (`usage_rotation`); NaN and Infinity as
# Python's json writes them
HOSTILE_COUNTS = (str(2**64), "1" + "0" * 400, "-1", "1.5", "NaN", "Infinity", "-Infinity", '"12"')
HOSTILE_FIELDS = ("completion_tokens", "prompt_tokens", "prompt_tokens_details.cached_tokens")
_rotation = iter(range(1 << 62))
_rotation_lock = threading.Lock()


def _usage_rotation(note: dict):
    """Even requests: a good stream with usage; odd ones: the same with one hostile count (logged)."""
    with _rotation_lock:
        i = next(_rotation)
    counts = {"prompt_tokens": b"5", "completion_tokens": b"3"}
    if i % 2:
        value = HOSTILE_COUNTS[(i // 2) % len(HOSTILE_COUNTS)]
        field = HOSTILE_FIELDS[(i // 2) % len(HOSTILE_FIELDS)]
        if field.endswith("cached_tokens"):
            counts["prompt_tokens_details"] = b'{"cached_tokens":%s}' % value.encode()
        else:
            counts[field] = value.encode()
        note.update(hostile_field=field, hostile_value=value)
    usage = b",".join(b'"%s":%s' % (k.encode(), v) for k, v in counts.items())
    yield stream(content("a"), content("b"), content("c", "stop"),
                 b'data: {"id":"c","object":"chat.completion.chunk","choices":[],"usage":{' + usage + b"}}\n\n", DONE)


SCRIPTS: dict[str, list[tuple]] = {
    # 1 GiB of SSE comments, gzip-compressed: a bomb for the inflater (both transports)
    "gzip_bomb": [("gen", lambda note: _gzip_bomb(GZIP_HEAD % (b"200 OK", b"text/event-stream"),
                                                  b": hi\n\n", b": " + b"z" * 1021 + b"\n"))],
    # the same behind a first token (the limit between output events holds after one too)
    "gzip_bomb_after_token": [("gen", lambda note: _gzip_bomb(GZIP_HEAD % (b"200 OK", b"text/event-stream"),
                                                              content("a"), b":" + b"z" * 1022 + b"\n"))],
    # a 500 whose gzip body inflates to 1 GiB of JSON
    "gzip_bomb_error": [("gen", lambda note: _gzip_bomb(GZIP_HEAD % (b"500 Internal Server Error", b"application/json"),
                                                        b'{"error":{"message":"boom ', b"y" * 1024))],
    # a /v1/models answer that inflates to 1 GiB (GET /v1/models?script=gzip_bomb_models)
    "gzip_bomb_models": [("gen", lambda note: _gzip_bomb(GZIP_HEAD % (b"200 OK", b"application/json"),
                                                         b'{"object":"list","data":[', b'{"id":"m","object":"model"},'
                                                         ))],
    "endless_tokens": [("gen", lambda note: _endless_tokens())],
    # 40 tokens 50 ms apart: 2 s in all, never idle for long
    "slow_tokens": paced([content("t")] * 39 + [content("t", "stop"), USAGE, DONE], 0.05),
    "usage_rotation": [("gen", _usage_rotation)],
    # TGI-style keep-alive comments while the request waits in a queue: never a first token.
    "keepalive_no_token": [("send", HEAD)] + [("send", chunk(b": keep-alive\n\n")), ("sleep", 0.1)] * 15
    + [("send", END)],
    # two tokens, then only comments: the idle deadline between output events must fire.
    "keepalive_after_tokens": [("send", HEAD), ("send", chunk(content("a"))), ("send", chunk(content("b")))]
    + [("send", chunk(b":\n\n")), ("sleep", 0.1)] * 15 + [("send", END)],
    # a line that never ends (a broken proxy): sent in 64 KiB pieces, up to 64 MiB
    "endless_line": [("send", HEAD + b"%x\r\n" % (64 << 20) + b"data: {")] + [("send", b"x" * 65536)] * 1024,
    # a 500 whose body is 10 MB
    "huge_error": [("send", b"HTTP/1.1 500 Internal Server Error\r\ncontent-type: application/json\r\n"
                            b"content-length: 10485760\r\n\r\n" + b'{"error":{"message":"boom ' + b"y" * 1000)]
    + [("send", b"y" * 65536)] * 160,
    # events after [DONE] must not count: a content event 300 ms later
    "after_done": [("send", HEAD + chunk(content("a")) + chunk(content("b", "stop")) + chunk(USAGE) + chunk(DONE)),
                   ("sleep", 0.3), ("send", chunk(content("late"))), ("send", END)],
    # an event: line in one read, its data in the next; then a plain event that must stay plain
    "event_split": [("send", HEAD + chunk(b"event: ping\n")), ("sleep", 0.05),
                    ("send", chunk(b'data: {"type":"ping"}\n\n')), ("sleep", 0.05),
                    ("send", chunk(content("a"))), ("send", chunk(content("b", "stop"))), ("send", chunk(DONE)),
                    ("send", END)],
    # usage before choices in a content chunk, and two choices in one chunk
    "usage_first": [("send", stream(
        content("a"),
        b'data: {"id":"c","usage":{"prompt_tokens":7,"completion_tokens":2},"choices":[{"index":0,"delta":'
        b'{"content":"b"},"finish_reason":null}]}\n\n',
        content("", "stop"), DONE))],
    "two_choices": [("send", stream(
        b'data: {"id":"c","choices":[{"index":0,"delta":{"content":""},"finish_reason":null},{"index":1,"delta":'
        b'{"content":"x"},"finish_reason":null}]}\n\n',
        b'data: {"id":"c","choices":[{"index":0,"delta":{"content":"y"},"finish_reason":null},{"index":1,"delta":'
        b'{"content":""},"finish_reason":"stop"}]}\n\n', DONE))],
    # chunk extensions after the first content event (the fast path must not choke on them)
    "chunk_ext": [("send", HEAD + chunk(content("a"))), ("sleep", 0.02), ("send", chunk(content("b"), b";x=1")),
                  ("sleep", 0.02), ("send", chunk(content("c", "stop"), b";name=\"v\"")), ("send", chunk(DONE)),
                  ("send", END)],
    # lone CR line ends, CRLF line ends, an empty data: line (a keep-alive, not an event)
    "cr_lines": [("send", stream(b'data: {"choices":[{"delta":{"content":"a"},"finish_reason":null}]}\r\r',
                                 b"data:\r\n\r\n",
                                 b'data: {"choices":[{"delta":{"content":"b"},"finish_reason":"stop"}]}\r\n\r\n',
                                 b"data: [DONE]\r\r"))],
    "redirect": [("send", b"HTTP/1.1 307 Temporary Redirect\r\nlocation: https://elsewhere.example/v1/chat/completions"
                          b"\r\ncontent-length: 0\r\n\r\n")],
    "json_200": [("send", b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 63\r\n\r\n"
                          b'{"error": {"message": "streaming is disabled on this gateway"}}')],
    "gzip": [("send", _gzip_stream())],
    # 10 events written 20 ms apart (the timestamp test stalls the client meanwhile)
    "paced_20ms": paced([content(f"t{i}") for i in range(9)] + [content("t9", "stop"), USAGE, DONE], 0.02),
}


def _serve(conn: socket.socket, log_path: str, lock: threading.Lock) -> None:
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    conn.settimeout(30)
    with conn:
        buf = b""
        while b"\r\n\r\n" not in buf:
            data = conn.recv(65536)
            if not data:
                return
            buf += data
        head, _, rest = buf.partition(b"\r\n\r\n")
        headers = {}
        for line in head.decode("latin-1").split("\r\n")[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        length = int(headers.get("content-length", "0"))
        while len(rest) < length:
            data = conn.recv(65536)
            if not data:
                return
            rest += data
        target = head.split(b" ", 2)[1].decode("latin-1") if head.count(b" ") >= 2 else ""
        query = dict(q.partition("=")[::2] for q in target.partition("?")[2].split("&") if q)
        # X-Script runs on a POST (llmload's --header sends it on its GET /v1/models probe too: logged, not run);
        # ?script= on any request
        name = headers.get("x-script", "") or query.get("script", "")
        run_name = query.get("script") or (name if head.startswith(b"POST ") else "")
        sends = []
        note: dict = {}
        # no script (a probe of /v1/models, say): a model list, as any OpenAI-compatible server has
        models = b'{"object":"list","data":[{"id":"m","object":"model"}]}'
        script = SCRIPTS.get(run_name) or [("send", b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
                                                 b"content-length: %d\r\n\r\n%s" % (len(models), models))]
        try:
            for step in script:
                if step[0] == "send":
                    conn.sendall(step[1])
                    sends.append(time.perf_counter())
                elif step[0] == "gen":  # bytes made as they are sent: a bomb is never held whole
                    for piece in step[1](note):
                        conn.sendall(piece)
                        if len(sends) < 10_000:
                            sends.append(time.perf_counter())
                elif step[0] == "sleep":
                    time.sleep(step[1])
                else:
                    break
        except OSError:
            pass  # the client hung up (a deadline, a limit): that is what some tests expect
        with lock, open(log_path, "a") as f:
            f.write(json.dumps({"request_id": headers.get("x-request-id"), "script": name, "target": target,
                                "headers": headers,
                                "sends": sends, **note}) + "\n")


def serve(log_path: str) -> None:
    srv = socket.create_server(("127.0.0.1", 0))
    print(f"listening on http://127.0.0.1:{srv.getsockname()[1]}", flush=True)
    lock = threading.Lock()
    while True:
        conn, _ = srv.accept()
        threading.Thread(target=_serve, args=(conn, log_path, lock), daemon=True).start()


def start_process(log_path: str) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, __file__, log_path], stdout=subprocess.PIPE, text=True)
    line = proc.stdout.readline() if proc.stdout else ""
    if "listening on" not in line:
        proc.kill()
        raise RuntimeError(f"wire server did not start: {line!r}")
    return proc, line.rsplit(" ", 1)[1].strip()


def read_log(log_path: str, request_id: str, timeout: float = 5.0) -> dict:
    deadline = time.monotonic() + timeout
    while True:
        try:
            with open(log_path) as f:
                for line in f:
                    e = json.loads(line)
                    if e["request_id"] == request_id:
                        return e
        except FileNotFoundError:
            pass
        if time.monotonic() >= deadline:
            raise AssertionError(f"the wire server logged no request {request_id!r}")
        time.sleep(0.02)


if __name__ == "__main__":
    serve(sys.argv[1])
