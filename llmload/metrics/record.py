"""One request's outcome: the status taxonomy and the metric definitions. Pure, no I/O.

Definitions (docs/metrics.md says the same; t0 = just before the request is
written, all times from ``time.perf_counter()``):

* TTFT: t0 → first event carrying generated output (content, reasoning, tool calls, text);
  role-only and empty chunks never count. TTFT visible: t0 → first non-empty content.
* E2E: t0 → end of stream (``[DONE]``, or the last event when there is none); for a request
  that failed or was cancelled, t0 → the moment it failed (the timeout fired, the connection
  closed, the test ended), not its last event.
* output tokens: ``usage.completion_tokens``; without usage, the number of output-carrying
  chunks (``token_source=chunks``).
* TPOT: (E2E − TTFT) / (output tokens − 1) for output tokens ≥ 2 (vLLM's definition).
* ITL: the gaps between consecutive output-carrying events; ``itl_max_ms`` the worst one. A read
  that carried several output events stamps them with one time, so the gaps into and inside it
  cannot be known: they are left out and counted (``coalesced_reads``).
* Events after the end (``[DONE]``, ``response.completed``) are ignored; after an error event,
  output events are ignored but the usage and the end still count.

Usage::

    acc = StreamAccumulator(t0)
    acc.add(chunk, now)            # for every event, in arrival order
    rec = acc.finish(meta, end_state="complete", t_end=now)
"""

from __future__ import annotations

from dataclasses import dataclass, field

from llmload.files import REQUESTS_COLUMNS
from llmload.wire.chunks import Chunk
from llmload.wire.tool_calls import assemble

OK = "ok"
HTTP_3XX = "http_3xx"
RATE_LIMITED = "rate_limited"
HTTP_4XX = "http_4xx"
HTTP_5XX = "http_5xx"
CONNECT_ERROR = "connect_error"
TIMEOUT = "timeout"
TRUNCATED = "truncated"
STREAM_ERROR = "stream_error"
PROTOCOL_ERROR = "protocol_error"
EMPTY = "empty"
CANCELLED = "cancelled"

STATUSES = (OK, RATE_LIMITED, HTTP_3XX, HTTP_4XX, HTTP_5XX, CONNECT_ERROR, TIMEOUT, TRUNCATED, STREAM_ERROR,
            PROTOCOL_ERROR, EMPTY, CANCELLED)

NEVER_SENT = "stopped while connecting: the request was never sent"  # a cancelled row's error, no server saw it

CSV_COLUMNS = REQUESTS_COLUMNS  # the name this module has always exported; the list lives in llmload.files


@dataclass(slots=True)
class RequestMeta:
    """What the client knew when it sent the request."""

    request_id: str
    start_time: float  # Unix epoch seconds at t0
    scenario: str
    max_tokens: int | None = None
    users: int = 0
    worker: int = 0
    session_id: str = ""
    turn: int | None = None
    scheduled_time: float | None = None  # open-loop: when the arrival process wanted it sent (epoch s)
    requested_input_tokens: int | None = None  # prompt length the workload asked for
    arrival_rate: float | None = None  # open-loop: the run's target arrival rate (req/s) when it was scheduled
    run_id: str = ""  # the run's id (PREFIX_run.json); the process that writes the CSV fills it in
    step_kind: str = ""  # agent tasks: "task" (first call) or "tool_result" (a call after tool results)
    requested_image_tokens: int | None = None  # what the prompt's images cost a Qwen2-VL-style model
    call_id: str = ""  # call-graph sessions: the call's id, and the calls it waited for ("a+b")
    call_after: str = ""
    trace_id: str = ""  # --trace-context: the W3C trace id its traceparent header carried
    phase: str = ""  # "warmup": started in the run's warm-up (the process that writes the CSV marks it)
    inputs: int | None = None  # embeddings: the batch's number of inputs
    model: str = ""  # the model the request named, when its scenario mixes models (models:)
    priority: str = ""  # the request's priority class (priority:), when its scenario has one
    audio_seconds: float | None = None  # audio transcription: the length of the audio sent
    resent_input_tokens: int | None = None  # of requested_input_tokens, what the workload sent before by design
    span_id: str = ""  # --trace-context: the traceparent's parent id, the client span's (not a CSV column)


@dataclass(slots=True)
class RequestRecord:
    """One finished request: a row of PREFIX_requests.csv plus its ITL gaps."""

    meta: RequestMeta
    status: str
    http_status: int | None = None
    ttft_ms: float | None = None
    ttft_visible_ms: float | None = None
    tpot_ms: float | None = None
    e2e_ms: float | None = None
    itl_max_ms: float | None = None
    prompt_tokens: int | None = None
    cached_tokens: int | None = None
    completion_tokens: int | None = None
    token_source: str = ""
    finish_reason: str = ""
    error: str = ""
    text: str = ""  # the reply, when asked for (multi-turn)
    tool_calls: list[dict] = field(default_factory=list)  # the reply's whole tool calls, when text is asked for
    itl_ms: list[float] = field(default_factory=list)  # the gaps that can be known (see coalesced_reads)
    coalesced_reads: int = 0  # reads that carried more than one output event
    output_events: int = 0  # events that carried output (the chunk count when there is no usage)
    content_encoding: str = ""  # set when the server compressed the body despite Accept-Encoding: identity
    t0: float | None = None  # perf_counter() at t0, to hold timings against a server's own log
    retry_after: str = ""  # the response's Retry-After header, if any (not a CSV column)
    backoff_ms: float | None = None  # how long the user waited after this request (429/503/unreachable)
    response_bytes: int = 0  # the response body's bytes as received (Locust's "size" of the request; not a CSV column)
    clock_stamped: bool = False  # timed by the clock after each read, not the kernel's receive stamps (TLS, the SDK)

    @property
    def ok(self) -> bool:
        return self.status == OK

    def row(self) -> tuple:
        """Values in CSV_COLUMNS order; None for an empty cell."""
        m = self.meta
        return (
            m.request_id, round(m.start_time, 6), m.scenario, self.status, self.http_status,
            rounded(self.ttft_ms), rounded(self.ttft_visible_ms), rounded(self.tpot_ms), rounded(self.e2e_ms),
            rounded(self.itl_max_ms),
            self.prompt_tokens, self.cached_tokens, self.completion_tokens, m.max_tokens, self.token_source,
            csv_text(self.finish_reason), m.users, m.worker, m.session_id, m.turn, csv_text(self.error),
            None if m.scheduled_time is None else round(m.scheduled_time, 6), m.requested_input_tokens,
            m.arrival_rate, m.run_id or None, self.coalesced_reads, m.step_kind, m.requested_image_tokens,
            rounded(self.backoff_ms), m.call_id or None, m.call_after or None, m.trace_id or None,
            m.phase or None, m.inputs, m.model or None, m.priority or None, rounded(m.audio_seconds),
            m.resent_input_tokens,
        )


_FORMULA_START = ("=", "+", "-", "@", "\t", "\r")


def csv_text(text: str) -> str:
    """Server text made safe for a spreadsheet: a cell that begins with ``= + - @`` (or a tab or CR)
    gets a leading ``'`` (OWASP's rule against CSV injection), so ``=HYPERLINK(...)`` in an error
    message stays text when the file is opened in a spreadsheet."""
    return "'" + text if text and text.startswith(_FORMULA_START) else text


def rounded(v: float | None, digits: int = 3) -> float | None:
    """``v`` rounded for a CSV or JSON cell; None for a missing or NaN value."""
    return None if v is None or v != v else round(v, digits)


def status_for_http(code: int) -> str:
    """The status of a response that is not a stream (an error, or a redirect llmload does not follow)."""
    if code == 429:
        return RATE_LIMITED
    if 300 <= code < 400:
        return HTTP_3XX
    if 400 <= code < 500:
        return HTTP_4XX
    return HTTP_5XX


class StreamAccumulator:
    """Collects a stream's events as they arrive; ``finish`` derives the record.

    ``add`` is on the hot path (once per event): it stores timestamps and nothing else.
    """

    __slots__ = ("t0", "times", "first_visible", "last_event", "finish_reason", "usage", "error", "done",
                 "bad", "texts", "want_text", "unknown_gaps", "content_encoding", "tool_pieces", "end_event")

    def __init__(self, t0: float, want_text: bool = False) -> None:
        self.t0 = t0
        self.times: list[float] = []  # arrival time of every output-carrying event
        self.first_visible: float | None = None
        self.last_event: float | None = None
        self.finish_reason: str | None = None
        self.usage: dict | None = None
        self.error: str | None = None
        self.done = False
        self.bad: str | None = None
        self.texts: list[str] = []
        self.want_text = want_text
        self.unknown_gaps: list[tuple[int, int]] = []  # (first index, count) of events read together
        self.content_encoding = ""
        self.tool_pieces: list = []  # delta.tool_calls pieces, kept with want_text
        # The event a stream must end with to be whole (the Messages API's message_stop), or None
        # when a finish reason is enough (chat and completions: [DONE] is optional on some servers).
        self.end_event: str | None = None

    def coalesced(self, first: int, count: int) -> None:
        """Output events ``first .. first + count - 1`` arrived in one read (one timestamp)."""
        self.unknown_gaps.append((first, count))

    def add(self, chunk: Chunk, now: float) -> None:
        if self.done or self.bad is not None:
            return  # nothing after the end, or after an event that could not be read, means anything
        if chunk.done:
            self.done = True
            self.last_event = now
            if chunk.usage is not None:
                self.usage = chunk.usage
            if chunk.finish_reason is not None:
                self.finish_reason = chunk.finish_reason
            return
        self.last_event = now
        if chunk.output and self.error is None:
            self.times.append(now)
            if chunk.visible and self.first_visible is None:
                self.first_visible = now
            if self.want_text:
                if chunk.text:
                    self.texts.append(chunk.text)
                if chunk.tool_calls:
                    self.tool_pieces.extend(chunk.tool_calls)
        if chunk.finish_reason is not None:
            self.finish_reason = chunk.finish_reason
        if chunk.usage is not None:
            # A usage without the prompt's count completes the one before (the Messages API sends the
            # prompt's in message_start and the output's in message_delta); chat's usage is whole.
            usage = self.usage
            self.usage = chunk.usage if usage is None or "prompt_tokens" in chunk.usage else {**usage, **chunk.usage}
        if chunk.error is not None and self.error is None:
            self.error = chunk.error
        if chunk.bad is not None and self.bad is None:
            self.bad = chunk.bad

    def finish(self, meta: RequestMeta, end_state: str, t_end: float, http_status: int | None = 200,
                detail: str = "") -> RequestRecord:
        """Derive the record. ``end_state``: ``complete`` (the HTTP message ended), ``eof``
        (the connection closed early), ``timeout``, ``cancelled`` or ``connect_error``."""
        rec = RequestRecord(meta=meta, status=OK, http_status=http_status, t0=self.t0)
        times = self.times
        t0 = self.t0
        rec.output_events = len(times)
        if times:
            rec.ttft_ms = (times[0] - t0) * 1000.0
            if len(times) > 1:
                gaps = [(b - a) * 1000.0 for a, b in zip(times, times[1:], strict=False)]
                if self.unknown_gaps:
                    rec.coalesced_reads = len(self.unknown_gaps)
                    unknown = set()
                    for first, count in self.unknown_gaps:
                        # gap i lies between events i and i + 1: the gap into the read and those inside it
                        unknown.update(range(max(first - 1, 0), first + count - 1))
                    gaps = [g for i, g in enumerate(gaps) if i not in unknown]
                rec.itl_ms = gaps
                rec.itl_max_ms = max(gaps) if gaps else None
        if self.first_visible is not None:
            rec.ttft_visible_ms = (self.first_visible - t0) * 1000.0
        usage = self.usage
        if usage and isinstance(usage.get("completion_tokens"), int):
            rec.completion_tokens = usage["completion_tokens"]
            rec.token_source = "usage"
        else:
            rec.completion_tokens = len(times)
            rec.token_source = "chunks"
        if usage:
            if isinstance(usage.get("prompt_tokens"), int):
                rec.prompt_tokens = usage["prompt_tokens"]
            details = usage.get("prompt_tokens_details")
            if isinstance(details, dict) and isinstance(details.get("cached_tokens"), int):
                rec.cached_tokens = details["cached_tokens"]
        rec.finish_reason = self.finish_reason or ""
        rec.content_encoding = self.content_encoding
        if self.want_text:
            rec.text = "".join(self.texts)
            if self.tool_pieces:
                rec.tool_calls = assemble(self.tool_pieces)

        # Status: the first that applies, most specific first.
        if end_state == "cancelled":
            rec.status, rec.error = CANCELLED, detail or "cut off by the end of the test"
        elif self.error is not None:
            rec.status, rec.error = STREAM_ERROR, self.error
        elif self.bad is not None:
            rec.status, rec.error = PROTOCOL_ERROR, self.bad
        elif end_state == "timeout":
            rec.status, rec.error = TIMEOUT, detail or "no progress within the request timeout"
        elif end_state == "connect_error":
            rec.status, rec.error = CONNECT_ERROR, detail
        elif self.end_event is not None and not self.done:
            rec.status = PROTOCOL_ERROR
            rec.error = (f"the stream ended without {self.end_event}" if end_state == "complete"
                         else f"connection closed before {self.end_event}" + (f": {detail}" if detail else ""))
        elif not self.done and self.finish_reason is None:
            rec.status = TRUNCATED
            rec.error = detail or ("stream ended without [DONE] or finish_reason"
                                   if end_state == "complete" else "connection closed mid-stream")
        elif not times:
            rec.status, rec.error = EMPTY, "finished with no output"

        # A stream that ended well ends at its last event; one that failed (a timeout, a closed
        # connection, the end of the test) ends when it failed, which can be long after that.
        end = self.last_event if rec.status == OK and self.last_event is not None else t_end
        rec.e2e_ms = (end - t0) * 1000.0
        n = rec.completion_tokens
        if rec.ttft_ms is not None and n is not None and n >= 2:
            rec.tpot_ms = (rec.e2e_ms - rec.ttft_ms) / (n - 1)
        return rec


def whole_body_record(meta: RequestMeta, latency_ms: float, http_status: int, error: str | None,
                      prompt_tokens: int | None) -> RequestRecord:
    """A whole-body request (embeddings): ``ok`` with its latency (t0 to the body's last bytes) as E2E
    and the usage's prompt tokens, or ``protocol_error`` with what was wrong with the body. No TTFT,
    no output tokens."""
    if error is not None:
        return RequestRecord(meta=meta, status=PROTOCOL_ERROR, http_status=http_status, e2e_ms=latency_ms,
                             prompt_tokens=prompt_tokens, error=error[:500])
    return RequestRecord(meta=meta, status=OK, http_status=http_status, e2e_ms=latency_ms, prompt_tokens=prompt_tokens,
                         completion_tokens=0, token_source="usage" if prompt_tokens is not None else "")


def failed_record(meta: RequestMeta, status: str, error: str, http_status: int | None = None,
                  e2e_ms: float | None = None, retry_after: str = "") -> RequestRecord:
    """A request that never streamed: HTTP error, connect error, cancelled before the head."""
    return RequestRecord(meta=meta, status=status, http_status=http_status, e2e_ms=e2e_ms, error=error[:500],
                         retry_after=retry_after[:100])
