"""The inter-process protocol: every message llmload's master and workers exchange over Locust's
channel, once, with its direction and payload fields. Senders and handlers use these names only.

A worker's three-second ``report_to_master`` payload travels under :data:`REPORT_KEY` with the
fields of :data:`FINAL` (without ``final``). The ``stats`` field is
:meth:`llmload.metrics.stats.LLMStats.take_delta` (scenario → the named fields documented in
:mod:`llmload.metrics.stats`); ``rows`` are request rows, positional in the order of
:data:`llmload.metrics.record.CSV_COLUMNS`.

Versions: every stats-bearing payload (report and final) carries ``version``. The master takes
nothing from a worker whose version is not :data:`PROTOCOL_VERSION` and says so once per worker
(:func:`mismatch`): a worker of another llmload cannot corrupt the merged stats.

Usage::

    runner.send_message(messages.USERS.name, messages.USERS.payload(t=time.time(), n=8))
    runner.register_message(messages.USERS.name, on_users)
    for m in messages.TABLE: print(m.name, m.direction, m.fields)
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Any

PROTOCOL_VERSION = 3
"""1: llmload before the protocol was declared (one-letter stats keys); 2: named stats fields; 3: the
master's --header and --query travel as ``master_header``/``master_query``, secret values withheld
(:mod:`llmload.plugin.options.shipped_options`): a worker of 2 would send without them."""

WORKER_TO_MASTER = "worker→master"
MASTER_TO_WORKER = "master→worker"
REPORT_KEY = "llmload"
"""llmload's key in the payload of Locust's own ``report_to_master`` (worker→master, every 3 s)."""


@dataclass(frozen=True)
class MessageType:
    name: str
    """The Locust message type (``runner.send_message(name, ...)``)."""
    direction: str
    """:data:`WORKER_TO_MASTER` or :data:`MASTER_TO_WORKER`."""
    fields: tuple[str, ...]
    """The payload's keys; empty when the payload is not a mapping (see ``doc``)."""
    doc: str

    def payload(self, **values: Any) -> dict[str, Any]:
        """The payload with exactly the declared fields (a typo fails here, at the sender)."""
        if set(values) != set(self.fields):
            raise ValueError(f"{self.name}: payload fields {sorted(values)}, declared {sorted(self.fields)}")
        return values


_STATS_FIELDS = ("rows", "stats", "in_flight", "health", "index", "version", "token")

USERS = MessageType("llmload_users", WORKER_TO_MASTER, ("t", "n", "token"),
                    "the worker's user count n at Unix time t, on every change (also its first word in a run)")
ROWS = MessageType("llmload_rows", WORKER_TO_MASTER, ("rows", "token"),
                   "up to links.ROWS_PER_MESSAGE request rows, every links.ROWS_SHIP_S")
SENT = MessageType("llmload_sent", WORKER_TO_MASTER, (),
                   "payload: one request id (a string), announced before its row is written")
FINAL = MessageType("llmload_final", WORKER_TO_MASTER, (*_STATS_FIELDS, "final"),
                    "everything left at the worker's test stop; final is True")
FINAL_ROWS_ONLY = MessageType(FINAL.name, WORKER_TO_MASTER, ("rows", "error", "token", "final"),
                              "the same message when the worker's stats could not be made: its rows and why")
TRACE_DONE = MessageType("llmload_trace_done", WORKER_TO_MASTER, ("index",),
                         "every trace schedule of worker index has handed out and recorded its share")
STOP = MessageType("llmload_stop", MASTER_TO_WORKER, (),
                   "payload: None; stop the users now and send FINAL")
COUNTS = MessageType("llmload_counts", MASTER_TO_WORKER, ("t", "counts"),
                     "every worker's user count (client id → n) as of Unix time t")
PROCESSES = MessageType("llmload_processes", MASTER_TO_WORKER, ("n", "csv", "run_id", "version"),
                        "n worker processes share the load; the master's --csv prefix and run id")
RATE = MessageType("llmload_rate", MASTER_TO_WORKER, ("rate",),
                   "the arrival-rate ladder's current rate (requests/s, over all processes)")
TRACE_T0 = MessageType("llmload_trace_t0", MASTER_TO_WORKER, ("t0",),
                       "trace time 0 as one Unix time for every process")
WARMUP = MessageType("llmload_warmup", MASTER_TO_WORKER, ("seconds", "ended_at"),
                     "the warm-up began (ended_at None) or ended at Unix time ended_at: a worker marks its own copy")
PHASE = MessageType("llmload_phase", MASTER_TO_WORKER, ("label", "at"),
                    "an --isolation phase (alone:CLASS, together) began at Unix time at: a worker marks its own copy")

TABLE: tuple[MessageType, ...] = (USERS, ROWS, SENT, FINAL, TRACE_DONE, STOP, COUNTS, PROCESSES, RATE, TRACE_T0,
                                 WARMUP, PHASE)
REPORT_FIELDS = _STATS_FIELDS
"""The fields of the payload under :data:`REPORT_KEY`."""


def token_ok(payload: Any, token: str) -> bool:
    """Whether a worker's payload carries the master's ``--cluster-token`` (always, without one).
    Every payload a worker sends but the request ids of SENT carries ``token``."""
    if not token:
        return True
    given = payload.get("token") if isinstance(payload, dict) else None
    return isinstance(given, str) and hmac.compare_digest(given.encode(), token.encode())


def mismatch(payload: dict[str, Any]) -> str:
    """Why a worker's report or final payload cannot be taken ('' when it can)."""
    version = payload.get("version", 1)
    if version == PROTOCOL_VERSION:
        return ""
    return (f"protocol version {version}, this master speaks {PROTOCOL_VERSION}: install the same llmload "
            f"version on every worker and the master")
