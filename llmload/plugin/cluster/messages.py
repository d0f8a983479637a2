"""The inter-process protocol: every message llmload's master and workers exchange over Locust's
channel, once, with its direction and payload fields. Senders and handlers use these names only.

A worker's three-second report is :data:`REPORT`; :data:`FINAL` has its fields and the rows left,
with ``final``. The ``stats`` field is
:meth:`llmload.metrics.stats.LLMStats.take_delta` (scenario → the named fields documented in
:mod:`llmload.metrics.stats`); ``rows`` are request rows, positional in the order of
:data:`llmload.metrics.record.CSV_COLUMNS`.

Versions: every worker→master payload but SENT's carries ``version``. The master takes nothing
from a worker whose version is not :data:`PROTOCOL_VERSION` and says so once per worker
(:func:`mismatch`): a worker of another llmload cannot corrupt the merged stats.

Shapes: each message declares its payload's shape once, here (``schema``, :mod:`llmload.plugin.cluster.schema`);
the receiving process checks it before any of the payload is used (:meth:`MessageType.refusal`), so a
payload with a wrong type, a huge integer, NaN or infinity, a missing or an extra field, or a field of
megabytes is refused whole, with the reason, and never half-taken. Locust's own messages, which share
the channel, have their shapes in :data:`LOCUST_SHAPES`.

Usage::

    runner.send_message(messages.USERS.name, messages.USERS.payload(t=time.time(), n=8))
    runner.register_message(messages.USERS.name, on_users)
    for m in messages.TABLE: print(m.name, m.direction, m.fields)
    why = messages.ROWS.refusal(payload)        # '' when the payload may be taken
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Any

from llmload.files import COL, REQUESTS_COLUMNS
from llmload.health.stalls import BOUNDS_MS, KEEP_WORST
from llmload.metrics.agent_tasks import OUTCOMES
from llmload.metrics.catalog import HISTOGRAM_KEYS
from llmload.metrics.record import STATUSES
from llmload.plugin.cluster.schema import (
    Cells,
    Check,
    Either,
    Flag,
    Int,
    Invalid,
    Keyed,
    Map,
    Nothing,
    Num,
    Opt,
    Record,
    Seq,
    Text,
    shown,
)

PROTOCOL_VERSION = 6
"""1: llmload before the protocol was declared (one-letter stats keys); 2: named stats fields; 3: the
master's --header and --query travel as ``master_header``/``master_query``, secret values withheld
(:mod:`llmload.plugin.options.shipped_options`): a worker of 2 would send without them; 4: every payload is
checked against its declared shape, and USERS, ROWS, TRACE_DONE and FINAL's rows-only form carry
``version`` (TRACE_DONE also ``token``); 5: rows end with ``resent_input_tokens``, the master's --csv
travels with its directory (``csv_dir``, ``csv_dir_id``) and a worker's report and final payloads say
where it keeps its copy (``copy``); 6: a health sample carries ``timing`` (requests whose timing a
stall may have touched) and ``interval_s``."""

WORKER_TO_MASTER = "worker→master"
MASTER_TO_WORKER = "master→worker"
REPORT_KEY = "llmload"
"""llmload's key in the payload of Locust's own ``report_to_master``, where protocol 3 and older put
their report (a master of 4 refuses such a worker, saying its version)."""
ROWS_PER_MESSAGE = 200
"""Rows in one ROWS message at most (a worker ships every ``links.ROWS_SHIP_S``)."""
MAX_ROWS = 1_000_000
"""Rows in one report or final payload at most (what a worker had not yet shipped)."""

# -- the shapes of the values inside payloads ---------------------------------------------------------
BIG = 2 ** 53  # counts and sums: exact in a float, far past any run's
TEXT = 64 * 1024  # any text a server or a file may have put in a row (errors are cut to 500 before that)
NAME = 4096  # a scenario, model or class name
UNIX = Num(0, 1e11)  # a Unix time (seconds; year 5138)
MS = Num(0, 1e15)
TOKENS = Int(0, 2 ** 32)

_ROW_CELLS: dict[str, Check] = {
    "request_id": Text(1024), "start_time": UNIX, "scenario": Text(NAME), "status": Text(32, STATUSES),
    "http_status": Opt(Int(0, 999)), "ttft_ms": Opt(MS), "ttft_visible_ms": Opt(MS), "tpot_ms": Opt(MS),
    "e2e_ms": Opt(MS), "itl_max_ms": Opt(MS), "prompt_tokens": Opt(TOKENS), "cached_tokens": Opt(TOKENS),
    "completion_tokens": Opt(TOKENS), "max_tokens": Opt(TOKENS), "token_source": Text(32),
    "finish_reason": Text(TEXT), "users": Int(0, 10 ** 9), "worker": Int(0, 2 ** 31), "session_id": Text(TEXT),
    "turn": Opt(Int(0, 2 ** 31)), "error": Text(TEXT), "scheduled_time": Opt(UNIX),
    "requested_input_tokens": Opt(TOKENS), "arrival_rate": Opt(Num(0, 1e9)), "run_id": Opt(Text(NAME)),
    "coalesced_reads": TOKENS, "step_kind": Text(32), "requested_image_tokens": Opt(TOKENS), "backoff_ms": Opt(MS),
    "call_id": Opt(Text(TEXT)), "call_after": Opt(Text(TEXT)), "trace_id": Opt(Text(TEXT)), "phase": Opt(Text(NAME)),
    "inputs": Opt(TOKENS), "model": Opt(Text(NAME)), "priority": Opt(Text(NAME)), "audio_seconds": Opt(Num(0, 1e9)),
    "resent_input_tokens": Opt(TOKENS),
}
ROW = Cells((_ROW_CELLS[c] for c in REQUESTS_COLUMNS), REQUESTS_COLUMNS)
"""A request row, positional in REQUESTS_COLUMNS order (:meth:`llmload.metrics.record.RequestRecord.row`)."""
WORKER_COL = COL.worker


def _histogram_is_whole(h: dict[str, Any]) -> None:
    keys, counts = h["k"], h["c"]
    if len(keys) != len(counts):
        raise Invalid(f"{len(keys)} buckets but {len(counts)} counts")
    if any(b <= a for a, b in zip(keys, keys[1:])):  # noqa: B905 - offset by one on purpose
        raise Invalid("bucket keys not in increasing order")
    if sum(counts) != h["n"]:
        raise Invalid(f"counts add up to {sum(counts)}, n is {h['n']}")
    if h["n"] and (h["lo"] is None or h["hi"] is None or h["lo"] > h["hi"]):
        raise Invalid(f"min {shown(h['lo'])} and max {shown(h['hi'])} of {h['n']} values")


# A bucket key is log_1.02(value / 0.001): 4096 buckets reach 10**32 ms (llmload.metrics.histogram)
HISTOGRAM = Record({"k": Seq(Int(0, 4096), 4097), "c": Seq(Int(0, BIG), 4097), "n": Int(0, BIG),
                    "s": Num(-1e30, 1e30), "lo": Opt(Num(-1e30, 1e30)), "hi": Opt(Num(-1e30, 1e30))},
                   also=_histogram_is_whole)
""":meth:`llmload.metrics.histogram.Histogram.to_wire`."""
COUNT = Int(0, BIG)
TASKS = Record({"h": Opt(HISTOGRAM), "o": Map(Text(32, OUTCOMES), COUNT, len(OUTCOMES)),
                "n": Cells([COUNT] * 5, ("calls", "prompt", "completion", "within", "judged"))})
""":meth:`llmload.metrics.agent_tasks.TaskStats.to_wire`."""
_SCENARIO_FIELDS: dict[str, Check] = {
    "histograms": Map(Text(32, HISTOGRAM_KEYS), HISTOGRAM, len(HISTOGRAM_KEYS)),
    "statuses": Map(Text(32, STATUSES), COUNT, len(STATUSES)), "first_start": Opt(UNIX), "last_end": Opt(UNIX),
    "schedule_lag": Opt(HISTOGRAM), "tasks": Opt(TASKS),
    **{k: COUNT for k in ("output_tokens", "prompt_tokens", "cached_tokens", "requested_input_tokens",
                          "reported_input_tokens", "compared", "compressed", "coalesced", "late",
                          "requested_image_tokens", "backoff_waits", "resent_input_tokens")},
    "backoff_ms": Num(0, 1e18),
}
_MODEL_STATS = Record(_SCENARIO_FIELDS)
STATS = Map(Text(NAME), Record(_SCENARIO_FIELDS, optional={"models": Map(Text(NAME), _MODEL_STATS, 10_000)}), 10_000)
"""The stats delta: :meth:`llmload.metrics.stats.LLMStats.take_delta` (scenario → named fields)."""
_STALL_NUMBERS = ("total_ms", "max_ms", "max_cpu_ms")
STALLS = Record({"turns": COUNT, "buckets": Cells([COUNT] * len(BOUNDS_MS), map(str, BOUNDS_MS)),
                 "cpu_buckets": Cells([COUNT] * len(BOUNDS_MS), map(str, BOUNDS_MS)), "count": COUNT, "own": COUNT,
                 **dict.fromkeys(_STALL_NUMBERS, MS),
                 "culprits": Map(Text(NAME), Cells([COUNT, MS, MS, MS, MS], ("n", "ms", "max", "cpu", "max_cpu")),
                                 10_000),
                 "worst": Seq(Cells([MS, MS, Text(NAME)], ("ms", "cpu_ms", "culprit")), KEEP_WORST),
                 "gc": Cells([COUNT, COUNT, COUNT, MS, MS], ("gen0", "gen1", "gen2", "ms", "max_ms"))})
""":meth:`llmload.health.stalls.StallStats.to_wire`."""
_PCT = Num(0, 1e6)
HEALTH = Record({
    "cpu": _PCT, "lag_p90_ms": MS, "lag_p99_ms": MS, "lag_max_ms": MS, "tps": Num(0, 1e12),
    "coalesced_share": Opt(_PCT), "streams": Int(0, 10 ** 9), "stalls_over_2ms": COUNT, "stall_max_ms": MS,
    "stall_cpu_max_ms": MS, "stall_culprit": Text(NAME), "stalls": STALLS, "cores": Int(0, 1 << 20),
    "machine_cores": Int(0, 1 << 20), "steal_pct": Opt(_PCT), "others_cpu": Opt(_PCT), "run_queue": Opt(_PCT),
    "load1": Opt(_PCT), "limited": Flag(), "cause": Text(NAME), "advice": Text(TEXT),
    "timing": Record(dict.fromkeys(("requests", "coalesced", "clock_in_stall"), COUNT)), "interval_s": Num(0, 1e9)})
"""One health sample: :meth:`llmload.health.sampler.ClientHealth.take`."""
IN_FLIGHT = Map(Text(NAME), Int(0, 10 ** 9), 10_000)
VERSION = Int(0, 2 ** 31)
TOKEN = Text(4096)
INDEX = Int(0, 2 ** 31)


@dataclass(frozen=True)
class MessageType:
    name: str
    """The Locust message type (``runner.send_message(name, ...)``)."""
    direction: str
    """:data:`WORKER_TO_MASTER` or :data:`MASTER_TO_WORKER`."""
    schema: Check
    """The payload's shape; a :class:`~llmload.plugin.cluster.schema.Record` names its fields."""
    doc: str

    @property
    def fields(self) -> tuple[str, ...]:
        """The payload's keys; empty when the payload is not a mapping (see ``doc``)."""
        return getattr(self.schema, "names", ())

    def payload(self, **values: Any) -> dict[str, Any]:
        """The payload with exactly the declared fields (a typo fails here, at the sender)."""
        if set(values) != set(self.fields):
            raise ValueError(f"{self.name}: payload fields {sorted(values)}, declared {sorted(self.fields)}")
        return values

    def refusal(self, payload: Any) -> str:
        """Why a received payload cannot be taken: '' when it has this message's shape."""
        try:
            self.schema.check(payload)
        except Invalid as e:
            return str(e)
        return ""


def _record(**fields: Check) -> Record:
    return Record(fields)


COPY = Opt(Record({"path": Text(TEXT), "host": Text(NAME), "how": Text(32)}))
"""Where a worker keeps its own copy of its rows: :meth:`llmload.plugin.output.run_files.RunFiles.copy_info`."""
_STATS_FIELDS = {"stats": STATS, "in_flight": IN_FLIGHT, "health": HEALTH, "index": INDEX, "version": VERSION,
                 "token": TOKEN, "copy": COPY}
_ROWS_ONLY = _record(rows=Seq(ROW, MAX_ROWS), error=Text(TEXT), token=TOKEN, version=VERSION, final=Flag())

USERS = MessageType("llmload_users", WORKER_TO_MASTER,
                    _record(t=UNIX, n=Int(0, 10 ** 9), token=TOKEN, version=VERSION),
                    "the worker's user count n at Unix time t, on every change (also its first word in a run)")
ROWS = MessageType("llmload_rows", WORKER_TO_MASTER,
                   _record(rows=Seq(ROW, ROWS_PER_MESSAGE), token=TOKEN, version=VERSION),
                   "up to ROWS_PER_MESSAGE request rows, every links.ROWS_SHIP_S")
SENT = MessageType("llmload_sent", WORKER_TO_MASTER, Text(1024),
                   "payload: one request id (a string), announced before its row is written")
FINAL = MessageType("llmload_final", WORKER_TO_MASTER,
                    Keyed("error", _ROWS_ONLY, Record({**_STATS_FIELDS, "rows": Seq(ROW, MAX_ROWS), "final": Flag()})),
                    "everything left at the worker's test stop; final is True")
FINAL_ROWS_ONLY = MessageType(FINAL.name, WORKER_TO_MASTER, _ROWS_ONLY,
                              "the same message when the worker's stats could not be made: its rows and why")
TRACE_DONE = MessageType("llmload_trace_done", WORKER_TO_MASTER, _record(index=INDEX, token=TOKEN, version=VERSION),
                         "every trace schedule of worker index has handed out and recorded its share")
REPORT = MessageType("llmload_report", WORKER_TO_MASTER, Record(_STATS_FIELDS),
                     "the worker's stats delta, in-flight requests and health, every links.WORKER_REPORT_S")
STOP = MessageType("llmload_stop", MASTER_TO_WORKER, Nothing(),
                   "payload: None; stop the users now and send FINAL")
COUNTS = MessageType("llmload_counts", MASTER_TO_WORKER, _record(t=UNIX, counts=Map(Text(NAME), Int(0, 10 ** 9),
                                                                                     100_000)),
                     "every worker's user count (client id → n) as of Unix time t")
PROCESSES = MessageType("llmload_processes", MASTER_TO_WORKER,
                        _record(n=Int(1, 10 ** 6), csv=Text(TEXT), csv_dir=Text(TEXT),
                                csv_dir_id=Opt(Cells([Int(0, 2 ** 64)] * 2, ("device", "inode"))), run_id=Text(NAME),
                                version=VERSION),
                        "n worker processes share the load; the master's --csv prefix, its directory (absolute, "
                        "and [device, inode] as the master sees it: llmload.files.worker_copy_prefix) and run id")
RATE = MessageType("llmload_rate", MASTER_TO_WORKER, _record(rate=Opt(Num(0, 1e9))),
                   "the arrival-rate ladder's current rate (requests/s, over all processes)")
TRACE_T0 = MessageType("llmload_trace_t0", MASTER_TO_WORKER, _record(t0=UNIX),
                       "trace time 0 as one Unix time for every process")
TRACE_T0_ASK = MessageType("llmload_trace_t0_ask", WORKER_TO_MASTER, _record(token=TOKEN, version=VERSION),
                           "a worker without trace time 0 asks again (it may have come before the worker listened)")
WARMUP = MessageType("llmload_warmup", MASTER_TO_WORKER, _record(seconds=Num(0, 1e9), ended_at=Opt(UNIX)),
                     "the warm-up began (ended_at None) or ended at Unix time ended_at: a worker marks its own copy")
PHASE = MessageType("llmload_phase", MASTER_TO_WORKER, _record(label=Text(NAME), at=UNIX),
                    "an --isolation phase (alone:CLASS, together) began at Unix time at: a worker marks its own copy")

TABLE: tuple[MessageType, ...] = (USERS, ROWS, SENT, REPORT, FINAL, TRACE_DONE, STOP, COUNTS, PROCESSES, RATE,
                                 TRACE_T0, TRACE_T0_ASK, WARMUP, PHASE)
REPORT_FIELDS = REPORT.fields


def token_ok(payload: Any, token: str) -> bool:
    """Whether a worker's payload carries the master's ``--cluster-token`` (always, without one).
    Every payload a worker sends but the request ids of SENT carries ``token``."""
    if not token:
        return True
    given = payload.get("token") if isinstance(payload, dict) else None
    return isinstance(given, str) and hmac.compare_digest(given.encode(), token.encode())


def mismatch(payload: Any) -> str:
    """Why a worker's payload is of another protocol version ('' when it is this one's)."""
    version = payload.get("version", 1) if isinstance(payload, dict) else 1
    if version == PROTOCOL_VERSION:
        return ""
    return (f"protocol version {shown(version)}, this master speaks {PROTOCOL_VERSION}: install the same llmload "
            f"version on every worker and the master")


# -- Locust's own messages on the same channel (locust/runners.py): what its handlers index blindly ----------
_NUMBER_MAP = Map(Either(Int(-BIG, BIG), Num(-1e18, 1e18)), COUNT, 1_000_000)
_LOCUST_ENTRY = Record({
    "name": Text(TEXT), "method": Text(TEXT), "last_request_timestamp": Opt(UNIX), "start_time": UNIX,
    "num_requests": COUNT, "num_none_requests": COUNT, "num_failures": COUNT, "total_response_time": Num(0, 1e18),
    "max_response_time": Num(0, 1e18), "min_response_time": Opt(Num(0, 1e18)), "total_content_length": COUNT,
    "response_times": _NUMBER_MAP, "num_reqs_per_sec": _NUMBER_MAP, "num_fail_per_sec": _NUMBER_MAP},
    open_ended=True)
_LOCUST_ERROR = Record({"name": Text(TEXT), "method": Text(TEXT), "error": Text(TEXT), "occurrences": COUNT},
                       optional={"first_seen": Opt(UNIX), "last_seen": Opt(UNIX)}, open_ended=True)
_CLASS_COUNTS = Map(Text(NAME), Int(0, 10 ** 9), 10_000)
LOCUST_SHAPES: dict[str, Check] = {
    "client_ready": Either(Text(64), Int(-1, -1)),
    "locustfile": Record({"version": Opt(Text(64))}, open_ended=True),
    "heartbeat": Record({"state": Text(32), "current_cpu_usage": Num(0, 1e6)},
                        optional={"current_memory_usage": Int(0, 2 ** 63)}, open_ended=True),
    "stats": Record({"stats": Seq(_LOCUST_ENTRY, 100_000), "stats_total": _LOCUST_ENTRY,
                     "errors": Map(Text(TEXT), _LOCUST_ERROR, 100_000), "user_count": Int(0, 10 ** 9),
                     "user_classes_count": _CLASS_COUNTS}, open_ended=True),
    "spawning": Nothing(),
    "spawning_complete": Record({"user_classes_count": _CLASS_COUNTS, "user_count": Int(0, 10 ** 9)},
                                open_ended=True),
    "client_stopped": Nothing(),
    "quit": Nothing(),
    "exception": Record({"msg": Text(TEXT), "traceback": Text(10 * TEXT)}, open_ended=True),
    "logs": Record({"worker_id": Text(NAME), "logs": Seq(Text(TEXT), 10_000)}, open_ended=True),
}
"""Locust's worker→master messages (other than llmload's) and the shape its handlers take for granted."""
JOIN_MESSAGES = ("client_ready", "locustfile")
"""What a process that has not joined may send: asking for the locustfile, and joining."""
