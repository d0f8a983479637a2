"""Whole-body calls in a user's greenlet (embeddings, rerank, score): the transport, the request's
meta, the answer held to its request, the record. One shape for ``LLMEmbeddingsUser``,
``LLMRerankUser``, a scenario workload with ``endpoint: embeddings|rerank|score`` and a RAG
pipeline's embed and rerank calls.

Usage::

    transport = body_transport(user.host, "embeddings", client)
    meta = body_meta(user, "embed", tokens=512, inputs=8)
    rec = send_whole_body(user, transport, body, meta, embeddings_check(8, None, "float"))
"""

from __future__ import annotations

from typing import Any

from llmload.metrics import record as R
from llmload.transport.connection import ClientOptions
from llmload.transport.fast import BodyCheck, FastTransport
from llmload.wire.embeddings import check_embeddings
from llmload.wire.protocol import BODY_ENDPOINTS
from llmload.wire.rerank import check_rerank, check_score, ranked_indices
from llmload.workload.distributions import Distribution
from llmload.workload.endpoints.embeddings import BatchPool, EmbeddingsWorkload
from llmload.workload.endpoints.rerank import RerankWorkload
from llmload.workload.file.spec import WorkloadSpec
from llmload.workload.scenario_workload import stable_seed


def body_transport(host: str, api: str, client: ClientOptions) -> FastTransport:
    """A keep-alive connection for ``api`` (``embeddings``, ``rerank`` or ``score``) that reads whole JSON bodies."""
    return FastTransport(host, BODY_ENDPOINTS[api], client, accept="application/json")


def body_meta(user: Any, scenario: str, tokens: int | None, inputs: int | None, session_id: str = "",
              turn: int | None = None, step_kind: str = "") -> R.RequestMeta:
    runner = user.environment.runner
    plugin = user.plugin
    return R.RequestMeta(request_id=plugin.next_request_id(), start_time=0.0, scenario=scenario,
                         users=runner.user_count if runner is not None else 0, worker=plugin.worker_index,
                         requested_input_tokens=tokens, inputs=inputs, session_id=session_id, turn=turn,
                         step_kind=step_kind, priority=getattr(user, "priority_class", ""))


def embeddings_check(inputs: int, dimensions: int | None, encoding_format: str) -> BodyCheck:
    def check(body: bytes, meta: R.RequestMeta, latency_ms: float, code: int) -> R.RequestRecord:
        result = check_embeddings(body, inputs, dimensions, encoding_format)
        return R.whole_body_record(meta, latency_ms, code, result.error, result.prompt_tokens)

    return check


def rank_check(api: str, documents: int, top_n: int | None, ranked: list[int] | None = None) -> BodyCheck:
    """``ranked``: filled with the documents' indices, best first, when the answer passes (a pipeline's chat)."""
    def check(body: bytes, meta: R.RequestMeta, latency_ms: float, code: int) -> R.RequestRecord:
        result = check_rerank(body, documents, top_n) if api == "rerank" else check_score(body, documents)
        if ranked is not None and result.error is None:
            ranked[:] = ranked_indices(body, api)
        return R.whole_body_record(meta, latency_ms, code, result.error, result.prompt_tokens)

    return check


def send_whole_body(user: Any, transport: FastTransport, body: bytes, meta: R.RequestMeta,
                    check: BodyCheck) -> R.RequestRecord:
    """Send, read the whole answer, check it, record it (also when the test cuts it off)."""
    rec = transport.stream(body, meta, on_cancel=user.plugin.record, check_body=check)
    user.plugin.record(rec)
    return rec


def embeddings_workload(user: Any, scenario: str, model: str, batch: Distribution, lengths: Distribution,
                        encoding_format: str, dimensions: int | None) -> EmbeddingsWorkload:
    """The user's batches, drawn from a pool built once per process and workload (the same in every
    run with the same ``--seed``), each request with the user's own tag."""
    plugin = user.plugin
    run_seed = int(plugin.option("seed", 0))
    key = ("embeddings", scenario, model, repr(batch), repr(lengths), encoding_format, dimensions)
    pool = plugin.shared.cached(key, lambda: BatchPool(
        model, batch, lengths, stable_seed(run_seed, scenario, plugin.worker_index), encoding_format, dimensions,
        plugin.shared.text_source(run_seed + plugin.worker_index, None)), run_seed)  # a new test's seed: new batches
    return EmbeddingsWorkload(scenario, model, batch, lengths, user.seed(), encoding_format, dimensions, pool=pool)


class EmbedCalls:
    """A user's task body for embeddings: one batch, sent and recorded."""

    def __init__(self, user: Any, workload: EmbeddingsWorkload, transport: FastTransport) -> None:
        self.user, self.workload, self.transport = user, workload, transport

    def __call__(self) -> None:
        w = self.workload
        request = w.next_request()
        meta = body_meta(self.user, request.scenario, request.input_tokens, request.inputs)
        send_whole_body(self.user, self.transport, request.body, meta,
                        embeddings_check(request.inputs, w.dimensions, w.encoding_format))


class RankCalls:
    """A user's task body for rerank or score: one query and its passages, sent and recorded."""

    def __init__(self, user: Any, workload: RerankWorkload, transport: FastTransport) -> None:
        self.user, self.workload, self.transport = user, workload, transport

    def __call__(self) -> None:
        request = self.workload.next_request()
        meta = body_meta(self.user, request.scenario, request.tokens, request.documents)
        send_whole_body(self.user, self.transport, request.body, meta,
                        rank_check(self.workload.api, request.documents, request.top_n))


def start_body_workload(user: Any, spec: WorkloadSpec, client: ClientOptions, model: str) -> None:
    """A scenario workload with ``endpoint: embeddings|rerank|score``: the user's transport and task body."""
    b = spec.body
    assert b is not None
    user.transport = transport = body_transport(user.host, spec.endpoint, client)
    if spec.endpoint == "embeddings":
        assert b.batch_size is not None and b.input_tokens is not None
        work = embeddings_workload(user, spec.name, model, b.batch_size, b.input_tokens, b.encoding_format,
                                   b.dimensions)
        user._loop = EmbedCalls(user, work, transport)
    else:
        assert b.documents is not None and b.query_tokens is not None and b.document_tokens is not None
        text = user.plugin.shared.text_source(int(user.plugin.option("seed", 0)) + user.plugin.worker_index, None)
        ranking = RerankWorkload(spec.name, model, spec.endpoint, b.documents, b.query_tokens, b.document_tokens,
                                 user.seed(), b.top_n, text)
        user._loop = RankCalls(user, ranking, transport)
