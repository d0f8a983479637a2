"""One scrape of a metrics endpoint, bounded: the fetch (in time, at most ``MAX_TIMEOUT_S``, and in
size: the ``Content-Length`` checked first, then at most ``MAX_EXPOSITION_BYTES + 1`` bytes read),
and the parse in slices of about 0.5 ms with a loop turn after each, so the users' streams are read
between them; what a scraper reads is its :class:`MetricsKind` (:data:`SERVER`, :data:`GPU`). The
loop that scrapes every interval is :mod:`llmload.server_metrics.scrape`.
"""

from __future__ import annotations

import http.client
import os
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from time import perf_counter

import gevent
import gevent.event

from llmload.net.turns import TURN_BUDGET_S, let_io_run
from llmload.server_metrics import (
    MAX_EXPOSITION_BYTES,
    ServerSnapshot,
    detect_engine,
    map_samples,
    parse_exposition,
    snapshot,
)
from llmload.server_metrics.gpu import gpu_samples
from llmload.server_metrics.known import MappedSample
from llmload.server_metrics.parse import Exposition

MAX_TIMEOUT_S = 10.0


# Straight to the server, as the load goes: no proxy from the environment (http_proxy ...).
_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


class ScrapeError(Exception):
    """One scrape that failed; the message says why."""


def fetch(url: str, timeout_s: float, max_bytes: int = MAX_EXPOSITION_BYTES) -> bytes:
    """GET ``url``: the body, or ScrapeError. Bounded in time (the whole exchange) and size."""
    headers = {"Accept": "text/plain; version=0.0.4", "User-Agent": f"llmload-server-metrics (pid {os.getpid()})"}
    try:
        with gevent.Timeout(timeout_s, ScrapeError(f"no complete answer within {timeout_s:g} s")), \
                _OPENER.open(urllib.request.Request(url, headers=headers), timeout=timeout_s) as resp:
            declared = resp.headers.get("Content-Length", "")
            if declared.isdigit() and int(declared) > max_bytes:
                raise ScrapeError(f"the body is {int(declared)} bytes (Content-Length), over the {max_bytes}-byte "
                                  "cap for a metrics exposition; not read")
            body = resp.read(max_bytes + 1)
    except urllib.error.HTTPError as e:
        raise ScrapeError(f"HTTP {e.code} {e.reason}") from None
    except urllib.error.URLError as e:
        raise ScrapeError(f"cannot connect: {e.reason}") from None
    except (OSError, http.client.HTTPException, ValueError) as e:
        raise ScrapeError(f"{type(e).__name__}: {e}" if str(e) else type(e).__name__) from None
    if len(body) > max_bytes:
        raise ScrapeError(f"the body is over the {max_bytes}-byte cap for a metrics exposition; stopped reading")
    return body


def _paced_parse(body: bytes, url: str) -> Exposition:
    """Parse in the scraping greenlet, letting the loop poll its sockets after every
    ``turns.TURN_BUDGET_S`` of parsing. Not in a pool thread: the parse holds the GIL either way, and
    a thread holds it for whole switch intervals (5 ms), which stalled every stream's reads."""
    since = perf_counter()

    def pause() -> None:
        nonlocal since
        if perf_counter() - since > TURN_BUDGET_S:
            let_io_run()
            since = perf_counter()

    exposition = parse_exposition(body, source=url, pause=pause)
    let_io_run()
    return exposition


def parse_in_slices(body: bytes, url: str) -> tuple[str | None, ServerSnapshot, list[MappedSample]]:
    """An engine's body: its engine, its snapshot and its samples under the common names, paced."""
    exposition = _paced_parse(body, url)  # each step below takes ~1 ms for TGI's 1,700 samples
    engine = detect_engine(exposition)
    snap = snapshot(exposition, engine)
    let_io_run()
    return engine, snap, map_samples(exposition, engine)


def parse_gpu_in_slices(body: bytes, url: str) -> tuple[str | None, ServerSnapshot | None, list[MappedSample]]:
    """A DCGM exporter's body: its samples (the ``DCGM_*`` fields), parsed with the same pauses as an engine's."""
    return "dcgm", None, gpu_samples(_paced_parse(body, url))


@dataclass(frozen=True)
class MetricsKind:
    """What one scraper reads: its name in messages, how a body becomes rows, and whether its
    scrapes feed the live view (:class:`FleetSeries`, ``samples``)."""

    what: str
    parse: Callable[[bytes, str], tuple[str | None, ServerSnapshot | None, list[MappedSample]]]
    live: bool
    stamp_answer: bool = False
    """Time each endpoint's rows by its own answer (the midpoint between sending the request and
    having the body) rather than by the tick: the report matches a GPU reading to the client's rows
    by time, and on a loaded machine a scrape can take tens of ms."""


SERVER = MetricsKind("server metrics", parse_in_slices, live=True)


GPU = MetricsKind("GPU metrics", parse_gpu_in_slices, live=False, stamp_answer=True)
