"""A RAG pipeline's task in one user's greenlet (``pipeline: [embed, rerank, chat]``): the query
embedded, the passages ranked, the best ones put into the chat prompt, each call a row of its own
(``step_kind`` embed, rerank or chat; ``session_id`` the task; ``turn`` its place), the task recorded
when its chat call ends, as an agent task is (:mod:`llmload.metrics.agent_tasks`): its time runs from
the first call's t0 to the end of the chat's stream and is judged by the workload's ``task_pNN_s``.
A failed call ends the task (``failed``); a task cut off by the end of the test is not recorded.

Usage (what :class:`~llmload.plugin.users.llm_user.LLMUser` does for a pipeline workload)::

    calls = start_pipeline(user, spec, body_client, model)     # the embed and rerank connections
    run_pipeline_task(user, calls)                              # one whole task
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from llmload.metrics.agent_tasks import TaskTracker
from llmload.plugin.users.whole_body import answer_check, body_meta, body_transport, send_whole_body
from llmload.transport.connection import ClientOptions
from llmload.transport.fast import FastTransport
from llmload.workload.file.spec import WorkloadSpec
from llmload.workload.tasks.rag_pipeline import RagPipeline


@dataclass
class PipelineCalls:
    """One user's pipeline: its tasks, and the connections of its embed and rerank calls (the chat
    call goes on the user's own transport)."""

    rag: RagPipeline
    embed: FastTransport | None
    rank: FastTransport | None

    def transports(self) -> list[FastTransport]:
        return [t for t in (self.embed, self.rank) if t is not None]


def start_pipeline(user: Any, spec: WorkloadSpec, client: ClientOptions, model: str) -> PipelineCalls:
    """The user's pipeline for ``spec`` (``client``: the options of the embed and rerank connections)."""
    pipe = spec.pipeline
    assert pipe is not None
    plugin = user.plugin
    text = plugin.shared.text_source(user.run_seed() + plugin.worker_index, None)
    setup = plugin.setup_for(type(user))
    rag = RagPipeline(spec, user.seed(), model, text, output_tokens=setup.output_override,
                      ignore_eos=True if plugin.option("ignore_eos") else None)
    embed = body_transport(user.host, "embeddings", client) if "embed" in pipe.steps else None
    rank = body_transport(user.host, pipe.rerank_api, client) if "rerank" in pipe.steps else None
    return PipelineCalls(rag, embed, rank)


def run_pipeline_task(user: Any, calls: PipelineCalls) -> None:
    """One task: its calls in order, each recorded; the task recorded when it ends."""
    rag = calls.rag
    b, api = rag.body, rag.pipeline.rerank_api
    task = rag.start_task()
    name = rag.spec.name
    tracker = TaskTracker(name, task.task_id)
    turn = 0
    ranked: list[int] = []
    if calls.embed is not None and task.embed_body is not None:
        turn += 1
        # no model in the row: the column means a models: mix (the step's own model is in its body)
        meta = body_meta(user, name, task.query_tokens, 1, task.task_id, turn, "embed")
        rec = send_whole_body(user, calls.embed, task.embed_body, meta,
                              answer_check("embeddings", (1, b.dimensions, b.encoding_format)))
        tracker.add(rec)
        if not rec.ok:
            user.plugin.record_task(tracker.finish("failed"))
            return
    if calls.rank is not None and task.rank_body is not None:
        turn += 1
        n = len(task.documents)
        tokens = task.query_tokens * n + sum(task.document_tokens)
        meta = body_meta(user, name, tokens, n, task.task_id, turn, "rerank")
        rec = send_whole_body(user, calls.rank, task.rank_body, meta,
                              answer_check(api, (n, b.top_n) if api == "rerank" else (n,), ranked))
        tracker.add(rec)
        if not rec.ok:
            user.plugin.record_task(tracker.finish("failed"))
            return
    rec = user.send_capped(rag.chat_request(task, ranked))
    tracker.add(rec)
    user.plugin.record_task(tracker.finish("answered" if rec.ok else "failed"))
