"""The mock's whole-body endpoints: ``/v1/embeddings`` (steps batched by tokens), ``/v1/rerank``
and ``/v1/score`` (steps batched by pairs). One request is parsed, queued for a step of its
batcher, answered with one JSON body and logged as the streaming endpoints are (``first_token_mono``:
when the answer was ready; ``inputs``: the batch's inputs or the query-document pairs). A part of
:class:`llmload.mock.server.MockServer` kept apart (the server module is at its size cap): it uses
the server's ids, faults, sends and log.

Usage::

    if path in BODY_PATHS and method == "POST":
        return serve_whole_body(server, sock, path, headers, body, rx_mono)
"""

from __future__ import annotations

import time
from time import perf_counter
from typing import Any

from llmload.mock.api import openai_api as api
from llmload.mock.api.embeddings_api import EmbeddingBatcher, embeddings_response, parse_embeddings_body
from llmload.mock.api.rerank_api import parse_rank_body, rank_response

BODY_PATHS = ("/v1/embeddings", "/v1/rerank", "/v1/score")
RANK_BATCH_PAIRS = 4096  # pairs one rerank step takes from the queue at most


def take_request(server: Any, headers: dict[str, str], rx_mono: float) -> tuple[float, str]:
    """A request taken by a non-chat endpoint: its arrival (Unix time of its receipt) and its id, counted."""
    server._ids += 1
    server.requests_total += 1
    return time.time() - (perf_counter() - rx_mono), headers.get("x-request-id") or f"mock-{server._ids}"


def serve_whole_body(server: Any, sock: Any, path: str, headers: dict[str, str], body: bytes,
                     rx_mono: float) -> bool:
    """One batch of inputs (or a query and its passages): queued for a step of the batched encoder
    (by tokens; rerank and score by pairs), then answered whole. True: the connection goes on."""
    arrival_unix, rid = take_request(server, headers, rx_mono)
    c = server.config
    try:
        fault = server.faults.pick(headers.get("x-mock-fault"))
        req: Any = (parse_embeddings_body(body, c.model, c.embed_dim) if path == "/v1/embeddings"
                    else parse_rank_body(body, path, c.model))
    except (ValueError, api.BadRequest) as e:
        server._send(sock, 400, api.error_body(400, str(e)))
        server._log_request(rid, rx_mono, arrival_unix, None, "error:400", 0, 0)
        return True
    if fault is not None and fault.kind == "http":
        server._send(sock, fault.status, api.error_body(fault.status, f"mock fault: HTTP {fault.status}"))
        server._log_request(rid, rx_mono, arrival_unix, None, f"fault:{fault.status}", req.tokens, 0, fault)
        return True
    if path == "/v1/embeddings":
        if server.embedder is None:
            server.embedder = EmbeddingBatcher(c.embed_base_ms, c.embed_per_token_ms, c.embed_batch_tokens)
        step_start = server.embedder.run(req.tokens)
        drop = fault is not None and fault.kind == "missing_vector"
        answer = embeddings_response(req, req.model, drop_one=drop)
        inputs, outcome = req.inputs, "fault:missing_vector" if drop else "completed"
    else:
        if server.ranker is None:
            server.ranker = EmbeddingBatcher(c.embed_base_ms, c.rerank_per_pair_ms, RANK_BATCH_PAIRS)  # weighs pairs
        step_start = server.ranker.run(req.pairs)
        drop = fault is not None and fault.kind == "wrong_index"
        answer = rank_response(req, req.model, wrong_index=drop)
        inputs, outcome = req.pairs, "fault:wrong_index" if drop else "completed"
    ready = perf_counter()  # the step's end: the answer leaves now (a client cannot have it earlier)
    server.engine.stats.pooled(req.tokens, step_start - rx_mono, ready - rx_mono)  # as vLLM counts pooling requests
    server._send(sock, 200, answer)
    sent = perf_counter()
    server.requests_by_outcome["completed"] = server.requests_by_outcome.get("completed", 0) + 1
    if server._log is not None:
        server._log.add({"request_id": rid, "arrival_unix": round(arrival_unix, 6), "arrival_mono": rx_mono,
                         "first_token_mono": ready, "last_token_mono": sent, "tokens_sent": 0,
                         "prompt_tokens": req.tokens, "cached_tokens": 0, "outcome": outcome,
                         "fault": fault.spec if fault else None, "image_tokens": 0,
                         "reply": path.rsplit("/", 1)[-1], "inputs": inputs})
    return True
