"""The mock's whole-body endpoints: ``/v1/embeddings`` (steps batched by tokens), ``/v1/rerank``
and ``/v1/score`` (steps batched by pairs), and the ones the API server answers at once without the
engine (a :class:`~llmload.mock.api.handler.PlainApi`: ``/tokenize``). One request is parsed,
queued for a step of its batcher (not a plain one), answered with one JSON body and logged as the
streaming endpoints are (``first_token_mono``: when the answer was ready; ``inputs``: the batch's
inputs or the query-document pairs; 1 for a plain one). A part of
:class:`llmload.mock.server.MockServer` kept apart (the server module is at its size cap): it uses
the server's ids, faults, sends and log.

Usage::

    EMBEDDINGS.serve(server, sock, "/v1/embeddings", headers, body, rx_mono)   # the server's route
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from time import perf_counter
from typing import Any

from llmload.mock.api.embeddings_api import EmbeddingBatcher, embeddings_response, parse_embeddings_body
from llmload.mock.api.handler import BodyApi, PlainApi
from llmload.mock.api.rerank_api import parse_rank_body, rank_response
from llmload.mock.front.faults import Fault
from llmload.mock.front.intake import admit

RANK_BATCH_PAIRS = 4096  # pairs one rerank step takes from the queue at most


def _answer(server: Any, sock: Any, path: str, rid: str, arrival_unix: float, rx_mono: float, fault: Fault | None,
            req: Any, answer: bytes, inputs: int, outcome: str,
            on_ready: Callable[[float], None] | None = None) -> None:
    """Send the answer and log it (``first_token_mono``: when it was ready, now); ``on_ready(ready)``
    counts it first, so a scrape after the answer sees it."""
    ready = perf_counter()  # the step's end: the answer leaves now (a client cannot have it earlier)
    if on_ready is not None:
        on_ready(ready)
    server._send(sock, 200, answer)
    sent = perf_counter()
    server.requests_by_outcome["completed"] = server.requests_by_outcome.get("completed", 0) + 1
    if server._log is not None:
        server._log.add({"request_id": rid, "arrival_unix": round(arrival_unix, 6), "arrival_mono": rx_mono,
                         "first_token_mono": ready, "last_token_mono": sent, "tokens_sent": 0,
                         "prompt_tokens": req.tokens, "cached_tokens": 0, "outcome": outcome,
                         "fault": fault.spec if fault else None, "image_tokens": 0,
                         "reply": path.rsplit("/", 1)[-1], "inputs": inputs})


def _pooled(server: Any, sock: Any, path: str, headers: dict[str, str], body: bytes, rx_mono: float,
            parse: Callable[[bytes, Any, str], Any], step: Callable[[Any, Any], float],
            answer: Callable[[Any, Fault | None], tuple[bytes, int, str]]) -> bool:
    """One batch of inputs (or a query and its passages): queued for a step of the batched encoder
    (``step``: by tokens; rerank and score by pairs), then answered whole. True: the connection goes on."""
    admitted = admit(server, sock, headers, body, rx_mono, lambda b: parse(b, server.config, path))
    if admitted is None:
        return True
    rid, arrival_unix, fault, req = admitted
    step_start = step(server, req)
    payload, inputs, outcome = answer(req, fault)
    _answer(server, sock, path, rid, arrival_unix, rx_mono, fault, req, payload, inputs, outcome,
            lambda ready: server.engine.stats.pooled(req.tokens, step_start - rx_mono, ready - rx_mono))  # as vLLM
    return True


def serve_plain(server: Any, sock: Any, handler: PlainApi, path: str, headers: dict[str, str], body: bytes,
                rx_mono: float) -> bool:
    """A request the API server answers itself, at once (no engine step): parsed, answered, logged."""
    admitted = admit(server, sock, headers, body, rx_mono, lambda b: handler.parse(b, server.config.model))
    if admitted is None:
        return True
    rid, arrival_unix, fault, req = admitted
    payload, outcome = handler.answer(req, fault.kind if fault is not None else "", server.max_model_len)
    _answer(server, sock, path, rid, arrival_unix, rx_mono, fault, req, payload, 1, outcome)
    return True


def _embed_step(server: Any, req: Any) -> float:
    if server.embedder is None:
        c = server.config
        server.embedder = EmbeddingBatcher(c.embed_base_ms, c.embed_per_token_ms, c.embed_batch_tokens)
    return server.embedder.run(req.tokens)


def _embed_answer(req: Any, fault: Fault | None) -> tuple[bytes, int, str]:
    drop = fault is not None and fault.kind == "missing_vector"
    outcome = "fault:missing_vector" if drop else "completed"
    return embeddings_response(req, req.model, drop_one=drop), req.inputs, outcome


def _rank_step(server: Any, req: Any) -> float:
    if server.ranker is None:  # weighs pairs
        c = server.config
        server.ranker = EmbeddingBatcher(c.embed_base_ms, c.rerank_per_pair_ms, RANK_BATCH_PAIRS)
    return server.ranker.run(req.pairs)


def _rank_answer(req: Any, fault: Fault | None) -> tuple[bytes, int, str]:
    drop = fault is not None and fault.kind == "wrong_index"
    return rank_response(req, req.model, wrong_index=drop), req.pairs, "fault:wrong_index" if drop else "completed"


EMBEDDINGS = BodyApi(serve=partial(_pooled, step=_embed_step, answer=_embed_answer,
                                   parse=lambda body, c, _path: parse_embeddings_body(body, c.model, c.embed_dim)))
# /v1/rerank and /v1/score, told apart by the path
RANK = BodyApi(serve=partial(_pooled, step=_rank_step, answer=_rank_answer,
                             parse=lambda body, c, path: parse_rank_body(body, path, c.model)))
