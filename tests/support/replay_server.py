"""Replays recorded HTTP/1.1 responses byte for byte, cut into writes by a chosen plan, and logs
when each byte was written.

A fixture is a complete raw response (tests/fixtures/streams/*.http). Per request the client names
the fixture and the plan in headers; the server answers with the fixture's bytes, one write at a
time, ``gap`` ms apart, with TCP_NODELAY so each write leaves as its own segment:

* ``as_framed``: one write per HTTP chunk, as the server that produced the fixture framed it;
* ``per_event``: one write per SSE block (event or comment), each re-framed as its own HTTP chunk
  when the fixture is chunked;
* ``split``: the fixture's own bytes cut at awkward places: inside chunk-size lines, inside
  ``data:``, between ``\\r`` and ``\\n``, inside multi-byte UTF-8 characters, inside the head;
* ``coalesced``: several HTTP chunks (so several events) per write, the head with the first ones.

Each replay appends one JSON line to the log: the request id (``X-Request-Id``), ``writes``
(``[perf_counter() just before the write, bytes]``) and ``event_times``: for every dispatched SSE
event (comments excluded, ``[DONE]`` included), the time of the write that carried its last byte,
which is when a client can first see it (null for events never written because the client hung
up first, noted as ``client_closed``). ``perf_counter`` is CLOCK_MONOTONIC, shared by every
process on the machine, so a client can hold its own timings to these.

Usage::

    python -m tests.support.replay_server --fixtures tests/fixtures/streams --log /tmp/replay.jsonl
    # prints "replay listening on http://127.0.0.1:PORT", then serves until killed or --lifetime-s

    curl -N -H 'X-Replay-Fixture: vllm_chat_usage' -H 'X-Replay-Plan: split' \\
         -d '{}' http://127.0.0.1:PORT/v1/chat/completions

Requests: ``GET /v1/models`` answers a one-model list (the openai SDK transport asks for it on
connect); ``POST`` with ``X-Replay-Fixture`` replays (optional ``X-Replay-Plan``, default
``as_framed``, and ``X-Replay-Gap-Ms``, default 5). Connections are kept alive as HTTP/1.1 allows.
Every read has a timeout and the process exits after ``--lifetime-s``.
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

PLANS = ("as_framed", "per_event", "split", "coalesced")
READ_TIMEOUT_S = 10.0
MAX_HEAD = 64 * 1024


@dataclass
class Fixture:
    """A parsed raw response. Offsets are into ``raw`` (the whole response)."""

    raw: bytes
    head_end: int  # offset just after the blank line that ends the head
    headers: dict[str, str]
    chunked: bool
    upper_hex: bool
    chunks: list[tuple[int, int]] = field(default_factory=list)  # wire span of each HTTP chunk, terminal included
    payload_pos: list[int] = field(default_factory=list)  # wire offset of each body payload byte
    blocks: list[tuple[int, int, bool]] = field(default_factory=list)  # payload span of each SSE block, dispatches?

    @property
    def keep_alive(self) -> bool:
        if "close" in self.headers.get("connection", "").lower():
            return False
        return self.chunked or "content-length" in self.headers

    def payload(self) -> bytes:
        return bytes(self.raw[i] for i in self.payload_pos)


def parse_fixture(raw: bytes) -> Fixture:
    """Split a raw response into head, HTTP chunks and SSE blocks; raises ValueError on bad framing."""
    i = raw.find(b"\r\n\r\n")
    if i < 0:
        raise ValueError("no blank line after the head")
    head_end = i + 4
    headers: dict[str, str] = {}
    for line in raw[:i].decode("latin-1").split("\r\n")[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    chunked = "chunked" in headers.get("transfer-encoding", "").lower()
    fx = Fixture(raw=raw, head_end=head_end, headers=headers, chunked=chunked, upper_hex=False)
    if chunked:
        pos = head_end
        while True:
            eol = raw.index(b"\r\n", pos)
            size_text = raw[pos:eol].split(b";")[0].strip()
            if any(c in b"ABCDEF" for c in size_text):
                fx.upper_hex = True
            size = int(size_text, 16)
            start = pos
            if size == 0:
                end = raw.index(b"\r\n\r\n", pos) + 4  # no trailers in any fixture
                fx.chunks.append((start, end))
                if end != len(raw):
                    raise ValueError("bytes after the terminal chunk")
                break
            data_start = eol + 2
            fx.payload_pos.extend(range(data_start, data_start + size))
            if raw[data_start + size:data_start + size + 2] != b"\r\n":
                raise ValueError(f"chunk at {start} not followed by CRLF")
            pos = data_start + size + 2
            fx.chunks.append((start, pos))
    else:
        n = int(headers["content-length"]) if "content-length" in headers else len(raw) - head_end
        fx.payload_pos = list(range(head_end, head_end + n))
    if headers.get("content-type", "").startswith("text/event-stream"):
        fx.blocks = sse_blocks(fx.payload())
    return fx


def sse_blocks(payload: bytes) -> list[tuple[int, int, bool]]:
    """(start, end, dispatches) per block of lines ended by a blank line (LF or CRLF)."""
    blocks = []
    start = pos = 0
    has_data = False
    while pos < len(payload):
        eol = payload.find(b"\n", pos)
        if eol < 0:
            break
        line = payload[pos:eol].rstrip(b"\r")
        pos = eol + 1
        if line:
            if line.startswith(b"data:") or line == b"data":
                has_data = True
        else:
            blocks.append((start, pos, has_data))
            start, has_data = pos, False
    return blocks


def plan_writes(fx: Fixture, plan: str) -> tuple[list[bytes], list[int]]:
    """The writes for ``plan`` and, per dispatched SSE event, the offset just past its last byte in
    the concatenated writes."""
    raw = fx.raw
    if plan == "per_event":
        return _per_event(fx)
    events_end = [fx.payload_pos[end - 1] + 1 for start, end, dispatches in fx.blocks if dispatches]
    if plan == "as_framed":
        cuts = [fx.head_end] + [end for _, end in fx.chunks[:-1]]
        if not fx.chunks:  # not chunked: one write for the head, one per SSE block
            cuts = [fx.head_end] + [fx.payload_pos[end - 1] + 1 for _, end, _ in fx.blocks]
    elif plan == "coalesced":
        ends = [end for _, end in fx.chunks[:-1]] or [fx.payload_pos[end - 1] + 1 for _, end, _ in fx.blocks]
        cuts = ends[2::3]  # the head and the first three chunks go together, then three per write
    elif plan == "split":
        cuts = _awkward_cuts(fx)
    else:
        raise ValueError(f"unknown plan {plan!r}; expected one of {', '.join(PLANS)}")
    cuts = sorted({c for c in cuts if 0 < c < len(raw)})
    bounds = [0, *cuts, len(raw)]
    return [raw[a:b] for a, b in zip(bounds, bounds[1:], strict=False)], events_end


def _per_event(fx: Fixture) -> tuple[list[bytes], list[int]]:
    payload = fx.payload()
    writes = [fx.raw[:fx.head_end]]
    sent = len(writes[0])
    events_end = []
    blocks = fx.blocks or [(0, len(payload), False)]
    for start, end, dispatches in blocks:
        block = payload[start:end]
        if fx.chunked:
            size = (f"{len(block):X}" if fx.upper_hex else f"{len(block):x}").encode()
            w = size + b"\r\n" + block + b"\r\n"
            last = sent + len(size) + 2 + len(block)
        else:
            w = block
            last = sent + len(block)
        writes.append(w)
        sent += len(w)
        if dispatches:
            events_end.append(last)
    if fx.chunked:
        writes.append(b"0\r\n\r\n")
    return writes, events_end


def _awkward_cuts(fx: Fixture) -> list[int]:
    raw = fx.raw
    cuts = [raw.index(b"\r\n") // 2, raw.index(b"\r\n") + 1]  # inside the status line; between its \r and \n
    spans = fx.chunks[:-1] or [(fx.payload_pos[s], fx.payload_pos[e - 1] + 1) for s, e, _ in fx.blocks]
    for k, (start, end) in enumerate(spans):
        kind = k % 3
        if fx.chunked and kind == 0:  # inside the chunk-size line
            eol = raw.index(b"\r\n", start)
            cuts.append(start + 1 if eol - start >= 2 else eol)
        elif kind == 1:  # inside "data:"
            j = raw.find(b"data:", start, end)
            if j >= 0:
                cuts.append(j + 2)
        else:  # between \r and \n: the chunk's closing CRLF, else the blank line
            cuts.append(end - 1)
        for j in range(start, end):  # inside the first multi-byte UTF-8 character of each chunk
            if raw[j] >= 0xC0:
                cuts.append(j + 1)
                break
    return cuts


@dataclass
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


def read_request(conn: socket.socket, buf: bytearray) -> Request | None:
    """One request from ``conn`` (leftover bytes in ``buf``); None at a clean EOF."""
    while b"\r\n\r\n" not in buf:
        if len(buf) > MAX_HEAD:
            raise ValueError("request head too large")
        data = conn.recv(65536)
        if not data:
            if buf:
                raise ValueError("connection closed mid-request")
            return None
        buf += data
    i = buf.index(b"\r\n\r\n")
    lines = bytes(buf[:i]).decode("latin-1").split("\r\n")
    del buf[:i + 4]
    method, path, _ = lines[0].split(" ", 2)
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    n = int(headers.get("content-length", "0"))
    while len(buf) < n:
        data = conn.recv(65536)
        if not data:
            raise ValueError("connection closed mid-body")
        buf += data
    body = bytes(buf[:n])
    del buf[:n]
    return Request(method, path, headers, body)


class ReplayServer:
    def __init__(self, fixtures_dir: Path, log_path: Path, host: str = "127.0.0.1", port: int = 0) -> None:
        self.fixtures: dict[str, Fixture] = {
            p.stem: parse_fixture(p.read_bytes()) for p in sorted(fixtures_dir.glob("*.http"))}
        self.log_path = log_path
        self.log_lock = threading.Lock()
        self.sock = socket.create_server((host, port))
        self.sock.settimeout(1.0)
        self.port = self.sock.getsockname()[1]

    def serve(self, lifetime_s: float) -> None:
        deadline = time.monotonic() + lifetime_s
        while time.monotonic() < deadline:
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        conn.settimeout(READ_TIMEOUT_S)
        conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        buf = bytearray()
        try:
            while True:
                req = read_request(conn, buf)
                if req is None:
                    return
                keep = self._answer(conn, req)
                if not keep or "close" in req.headers.get("connection", "").lower():
                    return
        except (OSError, ValueError):
            return
        finally:
            conn.close()

    def _answer(self, conn: socket.socket, req: Request) -> bool:
        received = time.perf_counter()
        name = req.headers.get("x-replay-fixture")
        if req.method == "GET" and req.path.rstrip("/").endswith("/models"):
            body = b'{"object":"list","data":[{"id":"replay","object":"model","created":0,"owned_by":"replay"}]}'
            conn.sendall(b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: "
                         + str(len(body)).encode() + b"\r\n\r\n" + body)
            return True
        if name not in self.fixtures:
            body = f"unknown fixture {name!r}".encode()
            conn.sendall(b"HTTP/1.1 404 Not Found\r\ncontent-type: text/plain\r\ncontent-length: "
                         + str(len(body)).encode() + b"\r\n\r\n" + body)
            return True
        fx = self.fixtures[name]
        plan = req.headers.get("x-replay-plan", "as_framed")
        gap = float(req.headers.get("x-replay-gap-ms", "5")) / 1000.0
        writes, events_end = plan_writes(fx, plan)
        times: list[float] = []
        client_closed = False
        for k, w in enumerate(writes):
            if k:
                time.sleep(gap)
            times.append(time.perf_counter())
            try:
                conn.sendall(w)
            except OSError:  # the client hung up (the openai SDK closes the stream on an error event)
                times.pop()
                client_closed = True
                break
        offsets, sent = [], 0
        for w in writes[:len(times)]:
            sent += len(w)
            offsets.append(sent)
        event_times = [next((times[k] for k, end in enumerate(offsets) if end >= e), None) for e in events_end]
        entry = {"request_id": req.headers.get("x-request-id", ""), "fixture": name, "plan": plan,
                 "received": received, "writes": [[t, len(w)] for t, w in zip(times, writes, strict=False)],
                 "event_times": event_times, "client_closed": client_closed}
        with self.log_lock, open(self.log_path, "a") as f:
            f.write(json.dumps(entry) + "\n")
        if client_closed:
            return False
        if not fx.keep_alive:
            conn.shutdown(socket.SHUT_WR)
            return False
        return True


def start_process(fixtures_dir: Path, log_path: Path, lifetime_s: float = 900.0,
                  timeout_s: float = 20.0) -> tuple[subprocess.Popen, str]:
    """Start a replay server in its own process; returns it and its base URL."""
    proc = subprocess.Popen(
        [sys.executable, os.path.abspath(__file__), "--fixtures", str(fixtures_dir), "--log", str(log_path),
         "--lifetime-s", str(lifetime_s)],
        stdout=subprocess.PIPE, text=True)
    deadline = time.monotonic() + timeout_s
    sel = selectors.DefaultSelector()
    sel.register(proc.stdout, selectors.EVENT_READ)
    while time.monotonic() < deadline:
        if sel.select(timeout=max(0.0, deadline - time.monotonic())):
            line = proc.stdout.readline()
            if line.startswith("replay listening on "):
                return proc, line.split()[-1]
            if not line:
                break
    proc.kill()
    raise RuntimeError("the replay server did not start")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--fixtures", type=Path, required=True)
    ap.add_argument("--log", type=Path, required=True)
    ap.add_argument("--port", type=int, default=0)
    ap.add_argument("--lifetime-s", type=float, default=900.0)
    args = ap.parse_args(argv)
    server = ReplayServer(args.fixtures, args.log, port=args.port)
    print(f"replay listening on http://127.0.0.1:{server.port}", flush=True)
    server.serve(args.lifetime_s)
    return 0


if __name__ == "__main__":
    sys.exit(main())
