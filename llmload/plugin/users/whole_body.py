"""Whole-body calls in a user's greenlet (embeddings, rerank, score, and every other endpoint that
answers with one body): the transport, the request's meta, the answer held to its request by the
endpoint's check, the record. One loop for ``LLMEmbeddingsUser``, ``LLMRerankUser``, a scenario
workload with ``endpoint: NAME`` of a whole-body endpoint, and a RAG pipeline's embed and rerank calls.

Usage::

    transport = body_transport(user.host, "embeddings", client)
    meta = body_meta(user, "embed", tokens=512, inputs=8)
    rec = send_whole_body(user, transport, body, meta, answer_check("embeddings", (8, None, "float")))
    user._loop = BodyCalls(user, "rerank", workload, transport)      # one request per task run
"""

from __future__ import annotations

from typing import Any

from llmload.metrics import record as R
from llmload.transport.connection import ClientOptions
from llmload.transport.fast import BodyCheck, FastTransport
from llmload.wire.endpoints import endpoint, part
from llmload.wire.rerank import ranked_indices
from llmload.workload.endpoints.body import BodyContext, BodyWorkload
from llmload.workload.file.spec import WorkloadSpec


def body_transport(host: str, name: str, client: ClientOptions) -> FastTransport:
    """A keep-alive connection to endpoint ``name`` (``embeddings``, ``rerank``, ...) that reads whole JSON bodies."""
    return FastTransport(host, endpoint(name).path, client, accept="application/json")


def body_meta(user: Any, scenario: str, tokens: int | None, inputs: int | None, session_id: str = "",
              turn: int | None = None, step_kind: str = "") -> R.RequestMeta:
    runner = user.environment.runner
    plugin = user.plugin
    return R.RequestMeta(request_id=plugin.next_request_id(), start_time=0.0, scenario=scenario,
                         users=runner.user_count if runner is not None else 0, worker=plugin.worker_index,
                         requested_input_tokens=tokens, inputs=inputs, session_id=session_id, turn=turn,
                         step_kind=step_kind, priority=getattr(user, "priority_class", ""))


def answer_check(name: str, args: tuple[Any, ...], ranked: list[int] | None = None) -> BodyCheck:
    """The answer held to its request by endpoint ``name``'s check (called with the answer and ``args``).
    ``ranked``: filled with the documents' indices, best first, when a rank answer passes (a pipeline's chat)."""
    check = part(endpoint(name).check)

    def checked(body: bytes, meta: R.RequestMeta, latency_ms: float, code: int) -> R.RequestRecord:
        result = check(body, *args)
        if ranked is not None and result.error is None:
            ranked[:] = ranked_indices(body, name)
        return R.whole_body_record(meta, latency_ms, code, result.error, result.prompt_tokens)

    return checked


def send_whole_body(user: Any, transport: FastTransport, body: bytes, meta: R.RequestMeta,
                    check: BodyCheck) -> R.RequestRecord:
    """Send, read the whole answer, check it, record it (also when the test cuts it off)."""
    rec = transport.stream(body, meta, on_cancel=user.plugin.record, check_body=check)
    user.plugin.record(rec)
    return rec


def body_context(user: Any) -> BodyContext:
    """What a whole-body workload is made with, from the user and its process (the class's seed:
    ``--seed``, else the scenario file's ``seed:``, else the run's fresh one; plugin.options.seeds)."""
    plugin = user.plugin
    run_seed = user.run_seed()
    return BodyContext(user.seed(), run_seed, plugin.worker_index,
                       plugin.shared.text_source(run_seed + plugin.worker_index, None), plugin.shared.cached)


class BodyCalls:
    """A user's task body for a whole-body endpoint: one request of its workload, sent and recorded."""

    def __init__(self, user: Any, name: str, workload: BodyWorkload, transport: FastTransport) -> None:
        self.user, self.name, self.workload, self.transport = user, name, workload, transport

    def __call__(self) -> None:
        request = self.workload.next_request()
        meta = body_meta(self.user, request.scenario, request.tokens, request.inputs)
        send_whole_body(self.user, self.transport, request.body, meta, answer_check(self.name, request.check))


def start_body_workload(user: Any, spec: WorkloadSpec, client: ClientOptions, model: str) -> None:
    """A scenario workload with ``endpoint: NAME`` of a whole-body endpoint: the user's transport and task
    body, its workload made as the endpoint's declaration says."""
    user.transport = transport = body_transport(user.host, spec.endpoint, client)
    work = part(endpoint(spec.endpoint).workload)(spec, model, body_context(user))
    user._loop = BodyCalls(user, spec.endpoint, work, transport)
