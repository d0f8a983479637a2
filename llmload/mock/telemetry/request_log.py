"""The mock's ground-truth log (``--log FILE``): one JSON line per request, written off the
serving path.

Encoding an entry is not free: with ``--log-tokens`` a 100-token request's line costs ~70 µs of
float formatting, and requests of a closed-loop test end together, so 256 of them encoded at
once held the mock's loop for ~15 ms: every stream in flight got a late token and the log
recorded a stall the mock made itself. Entries are therefore queued when a request ends and a
greenlet writes them a few at a time, letting the loop poll its sockets between batches.

Usage::

    log = RequestLog("truth.jsonl"); log.start()
    log.add({"request_id": "r1", ...})
    log.close()            # writes what is still queued
"""

from __future__ import annotations

import json
from typing import Any

import gevent
import gevent.event

BATCH = 16  # entries encoded per loop turn (~1 ms with per-token times)
YIELD_S = 0.0002  # a real pause: the loop polls its sockets (gevent.sleep(0) would not)


class RequestLog:
    def __init__(self, path: str) -> None:
        self._file = open(path, "a", encoding="utf-8")  # noqa: SIM115 (closed in close())
        self._queue: list[dict[str, Any]] = []
        self._ready = gevent.event.Event()
        self._writer: gevent.Greenlet | None = None

    def start(self) -> None:
        self._writer = gevent.spawn(self._write_forever)

    def add(self, entry: dict[str, Any]) -> None:
        self._queue.append(entry)
        self._ready.set()

    def _write_batch(self) -> None:
        batch = self._queue[:BATCH]
        del self._queue[:BATCH]
        self._file.write("".join(json.dumps(e) + "\n" for e in batch))
        self._file.flush()  # a whole line or none: readers poll the file while the mock runs

    def _write_forever(self) -> None:
        while True:
            self._ready.wait()
            self._ready.clear()
            while self._queue:
                self._write_batch()
                gevent.sleep(YIELD_S)

    def close(self) -> None:
        if self._writer is not None:
            self._writer.kill()
            self._writer = None
        while self._queue:
            self._write_batch()
        self._file.close()
