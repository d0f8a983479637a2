"""The mock's streaming endpoints (chat, completions, Responses, Messages: each a
:class:`~llmload.mock.api.handler.StreamApi`): one request parsed, checked against the faults, the
model's adapters and the queue, submitted to the engine, its tokens streamed by the driver (or
answered whole when it asked for no stream) and logged. A part of
:class:`llmload.mock.server.MockServer`, kept apart: it uses the server's engine, ids, faults, sends
and log.

Usage::

    if isinstance(handler, StreamApi):
        return serve_completion(server, sock, handler, headers, body, rx_mono)
"""

from __future__ import annotations

from time import perf_counter
from typing import Any

import gevent

from llmload.mock.api import openai_api as api
from llmload.mock.api.handler import Reply, StreamApi
from llmload.mock.api.structured import plan_reply
from llmload.mock.engine.engine_base import EngineRequest
from llmload.mock.front.admission import turn_away
from llmload.mock.front.intake import take_request
from llmload.mock.front.lora import wait_for_adapter
from llmload.mock.front.served_stream import ServedStream

SESSION_HEADER = "x-session-id"  # logged when a request carries it (headers arrive lower-cased)
STREAM_HEAD = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream; charset=utf-8\r\n"
               b"cache-control: no-cache\r\ntransfer-encoding: chunked\r\n\r\n")


def serve_completion(server: Any, sock: Any, handler: StreamApi, headers: dict[str, str], body: bytes,
                     rx_mono: float) -> bool:
    """One streaming request, served; True: the connection goes on."""
    # Arrival is when the kernel received the request's last bytes, not when this loop got
    # round to reading them: the log's TTFT then includes the mock's own queueing, as a
    # client sees it, and a client's timing error can be measured against it.
    arrival_mono = rx_mono
    server.gpu.load_started(arrival_mono)
    arrival_unix, rid = take_request(server, headers, rx_mono)
    try:
        fault = server.faults.pick(headers.get("x-mock-fault"))
    except ValueError as e:
        server._send(sock, 400, api.error_body(400, str(e)))
        server._log_request(rid, arrival_mono, arrival_unix, None, "error:400", 0, 0)
        return True
    if fault is not None and fault.kind == "http":
        ra = server.config.retry_after_s
        extra = f"retry-after: {ra:g}\r\n" if ra is not None and fault.status in (429, 503) else ""
        server._send(sock, fault.status, api.error_body(fault.status, f"mock fault: HTTP {fault.status}"),
                     extra=extra)
        server._log_request(rid, arrival_mono, arrival_unix, None, f"fault:{fault.status}", 0, 0, fault)
        return True
    try:
        req = handler.parse(body, server.config.model)
        output = api.choose_output_tokens(req, server.max_model_len, server.config.output_mean_tokens, server._rng)
        cap = req.max_tokens if req.max_tokens is not None else server.max_model_len - len(req.prompt_words)
    except api.BadRequest as e:
        server._send(sock, 400, api.error_body(400, str(e)))
        server._log_request(rid, arrival_mono, arrival_unix, None, "error:400", 0, 0)
        return True
    lora = server.lora
    if lora is not None and not lora.serves(req.model):
        server._send(sock, 404, lora.not_found_body(req.model))
        server._log_request(rid, arrival_mono, arrival_unix, None, "error:404", 0, 0)
        return True
    if turn_away(server, sock, req, rid, arrival_mono, arrival_unix):  # --max-queue: the queue ahead is full
        return True
    engine = server.engine
    stream = ServedStream(engine, sock, req, rid, fault, arrival_mono, arrival_unix)
    stream.max_tokens_cap = cap
    if server.config.log_tokens:
        stream.token_monos = []
    plan = plan_reply(req.tools, req.tool_choice, req.response_format, server._rng, server.config.tool_call_rate)
    stream.pieces = plan.pieces(output, server._ids)
    if plan.kind == "tool":
        stream.tool = (plan.call_id, plan.tool_name)
    elif req.thinking_budget:  # Messages with extended thinking: the reply's first tokens are thinking
        stream.fmt.thinking = min(req.thinking_budget, output // 2)
    if req.stream:
        sock.sendall(STREAM_HEAD)
    engine_req = EngineRequest(prompt_words=req.prompt_words, output_tokens=output, priority=req.priority)
    if fault is not None and fault.kind == "slow_first":
        engine_req.slow_first_s = fault.seconds
    if fault is not None and fault.kind == "stall":
        engine_req.stall_after, engine_req.stall_s = 1, fault.seconds
    adapter, queued_at = wait_for_adapter(lora, req.model, req.priority, engine)  # slot and load
    seq = engine.submit(engine_req, queued_at)  # queued_at: before the wait, which is queue time
    seq.user = stream
    stream.seq = seq
    if seq.finished:  # zero tokens asked for
        stream.finish_reason = "length"
        stream.on_emission(0, True, True, 0)
    server._wake.set()
    _wait_until_served(engine, sock, stream, seq, lora, adapter)
    if not req.stream and not stream.gone:
        server._send(sock, 200, handler.whole(Reply(
            rid, req.model, int(arrival_unix), "".join(stream.text), stream.finish_reason or "stop",
            len(req.prompt_words), seq.generated, seq.cached_tokens, stream.tool)))
        stream.first_mono = stream.first_mono or perf_counter()
        stream.last_mono = perf_counter()
    server._log_request(rid, arrival_mono, arrival_unix, stream, stream.outcome, len(req.prompt_words),
                        seq.cached_tokens, fault, req.image_tokens, plan.kind, headers.get(SESSION_HEADER),
                        headers.get("traceparent"))
    return not stream.gone


def _wait_until_served(engine: Any, sock: Any, stream: ServedStream, seq: Any, lora: Any, adapter: str | None) -> None:
    """The handler's side while the driver streams: flush what a slow reader left in the outbox,
    until the stream is done (a client that hangs up is noticed by the read watcher at once)."""
    stream.watcher = gevent.get_hub().loop.io(sock.fileno(), 1)
    stream.watcher.start(stream.on_readable)
    try:
        while True:
            stream.attention.wait()
            stream.attention.clear()
            if stream.outbox and not stream.gone:
                pending, stream.outbox = b"".join(stream.outbox), []
                try:
                    sock.sendall(pending)
                except OSError:
                    stream._client_gone()
            if stream.done and not stream.outbox:
                break
    finally:
        stream.stop_watching()
        if not stream.done:  # killed (server stopping)
            engine.abort(seq)
        if adapter is not None:
            lora.release(adapter)
