"""A process that speaks Locust's worker protocol on a master's ZeroMQ port with exactly the
messages it is told to: a rogue that never joins, a hostile worker that joins and sends malformed
payloads, a flooder (valid rows, as fast as the master takes them), or a light worker that replays
recorded rows at a set rate (the master's ingest benchmark). Plain pyzmq in its own process (never
gevent): nothing of llmload's worker runs.

A joined peer does what a Locust worker must for the master to count it: ``client_ready``, a
heartbeat a second, ``spawning``/``spawning_complete`` for each spawn message, and at ``stop`` its
llmload final data, ``client_stopped`` and ``client_ready`` again; ``quit`` ends it.

Usage::

    python -m tests.support.zmq_peer --port 5557 --mode rogue --out peer.json
    python -m tests.support.zmq_peer --port 5557 --mode light --rate 500 --seconds 60 --out w3.json
    python -m tests.support.zmq_peer --port 5557 --mode flood --csv run_requests.csv --out flood.json
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
import uuid
from typing import Any

import msgpack
import zmq
from locust import __version__ as LOCUST_VERSION
from locust.rpc import Message

from llmload.plugin.cluster import messages
from llmload.plugin.cluster.messages import PROTOCOL_VERSION as V

MIB = 1 << 20


class Peer:
    def __init__(self, port: int, identity: str | None = None) -> None:
        self.identity = identity or f"peer_{uuid.uuid4().hex[:12]}"
        self.ctx = zmq.Context()
        self.sock = self._socket(self.identity)
        self.sock.connect(f"tcp://127.0.0.1:{port}")
        self.port = port
        self.index: int | None = None
        self.state = "ready"
        self.last_beat = 0.0
        self.rtts: list[tuple[float, float]] = []  # (sent at, round trip s) of each heartbeat answered
        self._beats: list[float] = []
        self.stopped = False
        self.quit = False
        self.final: dict[str, Any] | None = None  # what to send at stop (None: an honest empty final)

    def _socket(self, identity: str) -> zmq.Socket:
        s = self.ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.IDENTITY, identity.encode())
        s.setsockopt(zmq.LINGER, 2000)
        return s

    def send(self, kind: str, data: Any, node_id: str | None = None) -> None:
        self.sock.send(Message(kind, data, node_id or self.identity).serialize())

    def send_raw(self, frame: bytes) -> None:
        self.sock.send(frame)

    def join(self, timeout_s: float = 30.0) -> None:
        self.send("client_ready", LOCUST_VERSION)
        t_end = time.monotonic() + timeout_s
        while self.index is None:
            if time.monotonic() > t_end:
                raise SystemExit(f"{self.identity}: no ack from the master")
            self.pump(0.05)

    def pump(self, seconds: float) -> None:
        """Answer the master for ``seconds``: heartbeats, spawns, stop and quit."""
        t_end = time.monotonic() + seconds
        while True:
            now = time.monotonic()
            if self.index is not None and now - self.last_beat >= 1.0:
                self.last_beat = now
                self._beats.append(now)
                self.send("heartbeat", {"state": self.state, "current_cpu_usage": 1.0, "current_memory_usage": 1})
            left = t_end - now
            if left <= 0 or self.quit:
                return
            if self.sock.poll(int(min(left, 0.05) * 1000)):
                self._on(Message.unserialize(self.sock.recv()))

    def _on(self, msg: Message) -> None:
        if msg.type == "ack":
            self.index = msg.data["index"]
        elif msg.type == "heartbeat" and self._beats:
            sent = self._beats.pop(0)
            self.rtts.append((sent, time.monotonic() - sent))
        elif msg.type == "spawn":
            self.send("spawning", None)
            self.state = "running"
            counts = msg.data["user_classes_count"]
            self.send("spawning_complete", {"user_classes_count": counts, "user_count": sum(counts.values())})
        elif msg.type in ("stop", messages.STOP.name):
            if not self.stopped:
                self.stopped = True
                self.send(messages.FINAL.name, self.final or honest_final(self.index or 0))
            if msg.type == "stop":
                self.state = "ready"
                self.send("client_stopped", None)
                self.send("client_ready", LOCUST_VERSION)
        elif msg.type == "quit":
            self.quit = True

    def close(self) -> None:
        self.sock.close()
        self.ctx.term()


def honest_final(index: int, rows: list | None = None) -> dict[str, Any]:
    return {"stats": {}, "in_flight": {}, "health": empty_health(), "index": index, "version": V, "token": "",
            "rows": rows or [], "final": True, "copy": None}


def empty_health() -> dict[str, Any]:
    stalls = {"turns": 0, "buckets": [0] * 7, "cpu_buckets": [0] * 7, "count": 0, "own": 0, "total_ms": 0.0,
              "max_ms": 0.0, "max_cpu_ms": 0.0, "culprits": {}, "worst": [], "gc": [0, 0, 0, 0.0, 0.0]}
    return {"cpu": 1.0, "lag_p90_ms": 0.1, "lag_p99_ms": 0.2, "lag_max_ms": 0.3, "tps": 0.0, "coalesced_share": None,
            "streams": 0, "stalls_over_2ms": 0, "stall_max_ms": 0.0, "stall_cpu_max_ms": 0.0, "stall_culprit": "",
            "stalls": stalls, "cores": 1, "machine_cores": 2, "steal_pct": None, "others_cpu": None, "run_queue": None,
            "load1": None, "limited": False, "cause": "", "advice": "",
            "timing": {"requests": 0, "coalesced": 0, "clock_in_stall": 0}, "interval_s": 3.0}


def a_row(index: int, rid: str, start: float, scenario: str = "chat") -> list:
    row: list[Any] = [None] * len(messages.REQUESTS_COLUMNS)
    col = {c: i for i, c in enumerate(messages.REQUESTS_COLUMNS)}
    for name, value in (("request_id", rid), ("start_time", start), ("scenario", scenario), ("status", "ok"),
                        ("http_status", 200), ("ttft_ms", 10.0), ("e2e_ms", 20.0), ("token_source", "usage"),
                        ("finish_reason", "stop"), ("users", 1), ("worker", index), ("session_id", ""),
                        ("error", ""), ("coalesced_reads", 0), ("step_kind", ""), ("completion_tokens", 3)):
        row[col[name]] = value
    return row


# -- what a rogue (never joined) and a hostile worker (joined) send ---------------------------------------
def rogue_messages(identity: str) -> list[tuple[str, Any]]:
    """The finding of issue 35: llmload's own messages with hostile payloads, from a non-member."""
    big = 2 ** 63 - 1
    return [
        (messages.USERS.name, {"t": "yesterday", "n": big, "token": "", "version": V}),
        (messages.ROWS.name, {"rows": [[identity + "-1"]], "token": "", "version": V}),
        (messages.ROWS.name, {"rows": [a_row(big, identity + "-2", time.time())], "token": "", "version": V}),
        (messages.SENT.name, identity + "-3"),
        (messages.FINAL.name, {"index": big, "rows": [], "final": True, "stats": {"chat": {}}}),
        (messages.REPORT.name, {"stats": {"chat": {"histograms": None}}, "index": big}),
        (messages.TRACE_DONE.name, {"index": big, "token": "", "version": V}),
        ("stats", {"stats": "x", "llmload": {"index": big}}),
        ("heartbeat", {"state": "running", "current_cpu_usage": "lots"}),
        ("spawning_complete", {"user_classes_count": 7}),
        ("exception", {"msg": 1}),
    ]


def hostile_messages(index: int, identity: str) -> list[tuple[str, str, Any]]:
    """(what it is, message, payload): every kind of malformed payload issue 35 names, each from a
    worker that joined; the protocol version from the future comes last (it refuses the worker whole)."""
    rid = f"{identity}-h"
    now = time.time()
    good_rows = {"rows": [a_row(index, rid + "0", now)], "token": "", "version": V}
    nan_row = a_row(index, rid + "1", now)
    nan_row[messages.REQUESTS_COLUMNS.index("ttft_ms")] = math.nan
    inf_row = a_row(index, rid + "2", now)
    inf_row[messages.REQUESTS_COLUMNS.index("e2e_ms")] = math.inf
    huge_row = a_row(index, rid + "3", now)
    huge_row[messages.REQUESTS_COLUMNS.index("completion_tokens")] = 2 ** 64 - 1
    return [
        ("wrong type", messages.USERS.name, {"t": "yesterday", "n": 3, "token": "", "version": V}),
        ("huge integer", messages.ROWS.name, {**good_rows, "rows": [huge_row]}),
        ("NaN", messages.ROWS.name, {**good_rows, "rows": [nan_row]}),
        ("infinity", messages.ROWS.name, {**good_rows, "rows": [inf_row]}),
        ("missing field", messages.REPORT.name, {"stats": {}, "in_flight": {}, "health": empty_health(),
                                                 "index": index, "version": V}),
        ("extra field", messages.ROWS.name, {**good_rows, "also": 1}),
        ("64 MiB field", messages.SENT.name, "x" * (64 * MIB)),
        ("wrong index", messages.ROWS.name, {"rows": [a_row(2 ** 31 - 1, rid + "4", now)], "token": "",
                                             "version": V}),
        ("stats of no shape", messages.REPORT.name, {"stats": {"chat": {"histograms": {"ttft": {"k": [1]}}}},
                                                     "in_flight": {}, "health": empty_health(), "index": index,
                                                     "version": V, "token": ""}),
        ("protocol version from the future", messages.ROWS.name, {**good_rows, "version": V + 95}),
    ]


def junk_frames() -> list[bytes]:
    return [b"\xc1", b"\x91" * 100_000 + b"\x00", msgpack.dumps([1, 2]), msgpack.dumps(5),
            msgpack.dumps(("llmload_rows", {"__datetime__": 1, "as_str": "x"}, "n"))]


def run_rogue(args: argparse.Namespace) -> dict[str, Any]:
    """Never joins: llmload's messages with hostile payloads, junk frames, and messages that speak
    as someone else, from three identities."""
    peer = Peer(args.port)
    spoofer = Peer(args.port)
    for kind, data in rogue_messages(peer.identity):
        peer.send(kind, data)
    for frame in junk_frames():
        spoofer.send_raw(frame)
    for kind, data in rogue_messages(spoofer.identity)[:3]:
        spoofer.send(kind, data, node_id=args.speak_as or "someone-else")
    time.sleep(1.0)
    sent = {"identities": [peer.identity, spoofer.identity]}
    peer.close()
    spoofer.close()
    return sent


def run_hostile(args: argparse.Namespace) -> dict[str, Any]:
    peer = Peer(args.port)
    peer.join()
    peer.pump(args.delay)
    sent = []
    for what, kind, data in hostile_messages(peer.index or 0, peer.identity):
        peer.send(kind, data)
        sent.append([what, kind])
        peer.pump(0.2)
    peer.send("heartbeat", {"state": "running", "current_cpu_usage": "lots"})  # Locust's own, malformed
    while not peer.quit:
        peer.pump(0.5)
    peer.close()
    return {"identity": peer.identity, "index": peer.index, "sent": sent}


def run_light(args: argparse.Namespace) -> dict[str, Any]:
    """An honest worker that replays rows at ``--rate`` rows/s in ROWS messages every 0.5 s, with a
    report every 3 s, for ``--seconds`` (``--flood``: also that many 1-row ROWS messages a second)."""
    peer = Peer(args.port)
    peer.join()
    peer.send(messages.USERS.name, messages.USERS.payload(t=time.time(), n=args.users, token="", version=V))
    while peer.state != "running" and not peer.quit:
        peer.pump(0.05)
    t0 = time.monotonic()
    sent_rows, n, last_report, behind = 0, 0, t0, 0.0
    tick = 0.5 if not args.flood else 1.0 / args.flood
    while not peer.quit and not peer.stopped and time.monotonic() - t0 < args.seconds:
        due = int((time.monotonic() - t0) * args.rate) - sent_rows
        chunk = []
        for _ in range(max(0, due)):
            n += 1
            chunk.append(a_row(peer.index or 0, f"{peer.identity}-{n}", time.time()))
        for i in range(0, len(chunk), messages.ROWS_PER_MESSAGE):
            peer.send(messages.ROWS.name, {"rows": chunk[i:i + messages.ROWS_PER_MESSAGE], "token": "",
                                           "version": V})
        sent_rows += len(chunk)
        if time.monotonic() - last_report >= 3.0:
            last_report = time.monotonic()
            peer.send(messages.REPORT.name, {"stats": {}, "in_flight": {}, "health": empty_health(),
                                             "index": peer.index or 0, "version": V, "token": "", "copy": None})
        peer.pump(tick)
        behind = max(behind, time.monotonic() - t0 - args.seconds)
    peer.send(messages.USERS.name, messages.USERS.payload(t=time.time(), n=0, token="", version=V))
    while not peer.quit and not peer.stopped:
        peer.pump(0.2)
    while not peer.quit:
        peer.pump(0.2)
    peer.close()
    return {"identity": peer.identity, "index": peer.index, "rows": sent_rows, "rtts": peer.rtts}


def run_flood(args: argparse.Namespace) -> dict[str, Any]:
    """A worker that joined and sends valid ``llmload_rows`` (its own index, scenario ``flood``) as
    fast as the master takes them, from its spawn to its stop: ``--rows`` rows a message, with at
    most ``--backlog`` rows sent that the master's CSV (``--csv``, tailed) does not hold yet, so the
    master's queue is never empty and never past that (its memory and the file stay bounded)."""
    peer = Peer(args.port, args.identity or None)
    peer.join()
    while peer.state != "running" and not peer.quit:
        peer.pump(0.05)
    t0, sent, msgs, written, offset = time.time(), 0, 0, 0, 0
    while not peer.quit and not peer.stopped:
        try:
            with open(args.csv, "rb") as f:
                f.seek(offset)
                new = f.read()
            offset += len(new)
            written += new.count(b"\n")
        except FileNotFoundError:
            pass
        burst = 0  # then answer the master (heartbeats) again
        while sent - written < args.backlog and burst < 2000:
            # its own scenario: the honest workers' "chat" in the live view is theirs alone
            template = a_row(peer.index or 0, "", time.time(), "flood")
            rows = [template.copy() for _ in range(args.rows)]
            for i, row in enumerate(rows):
                row[0] = f"{peer.identity}-{sent + i}"
            burst += args.rows
            peer.send(messages.ROWS.name, {"rows": rows, "token": "", "version": V})
            sent, msgs = sent + args.rows, msgs + 1
        peer.pump(0.002)
    seconds = time.time() - t0
    while not peer.quit:
        peer.pump(0.2)
    peer.close()
    return {"identity": peer.identity, "index": peer.index, "rows": sent, "messages": msgs, "seconds": seconds}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--port", type=int, required=True)
    ap.add_argument("--mode", choices=("rogue", "hostile", "light", "flood"), required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--delay", type=float, default=1.0)
    ap.add_argument("--rate", type=float, default=100.0)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--users", type=int, default=1)
    ap.add_argument("--flood", type=float, default=0.0)
    ap.add_argument("--speak-as", default="")
    ap.add_argument("--identity", default="")
    ap.add_argument("--csv", default="")
    ap.add_argument("--rows", type=int, default=1)
    ap.add_argument("--backlog", type=int, default=20_000)
    args = ap.parse_args(argv)
    result = {"rogue": run_rogue, "hostile": run_hostile, "light": run_light, "flood": run_flood}[args.mode](args)
    tmp = args.out + ".tmp"
    with open(tmp, "w") as f:
        json.dump(result, f)
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
