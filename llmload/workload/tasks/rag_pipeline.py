"""RAG pipeline tasks (``pipeline: [embed, rerank, chat]``): per task a query and the passages
retrieved for it, and the task's calls in order: the query embedded (a batch of one), the passages
ranked against the query (``/v1/rerank``, or vLLM's ``/v1/score``), the ``top_n`` best of them put
into the chat prompt with the query. Without a rerank step the first ``top_n`` passages are the
ones retrieved. Pure and seeded; texts unique per task (no cache answers them).

Usage::

    rag = RagPipeline(spec, seed=7, model="llama", text=TextSource(1))
    task = rag.start_task()                      # PipelineTask: the query, its passages, the bodies
    chat = rag.chat_request(task, ranked=[3, 0, 5, 1])   # LLMRequest: the prompt from the best passages
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from llmload.wire.embeddings import embeddings_body
from llmload.wire.protocol import encode_body
from llmload.wire.rerank import rerank_body, score_body
from llmload.workload.distributions import Distribution
from llmload.workload.file.spec import WorkloadSpec
from llmload.workload.request import LLMRequest
from llmload.workload.text import TextSource

DEFAULT_OUTPUT = 128
INSTRUCTION = "Answer the question from these passages."


@dataclass(frozen=True, slots=True)
class PipelineTask:
    """One task: its id (the rows' session_id), the query and its passages, and the bodies of the
    embed and rerank calls (None for a step the pipeline does not have)."""

    task_id: str
    query: str
    query_tokens: int
    documents: tuple[str, ...]
    document_tokens: tuple[int, ...]
    embed_body: bytes | None
    rank_body: bytes | None


class RagPipeline:
    """Tasks of one pipeline workload; ``output_tokens`` (``--output-tokens``) overrides the file's."""

    def __init__(self, spec: WorkloadSpec, seed: int, model: str, text: TextSource, embed_model: str = "",
                 rerank_model: str = "", output_tokens: Distribution | None = None,
                 ignore_eos: bool | None = None) -> None:
        assert spec.pipeline is not None and spec.body is not None
        self.spec, self.pipeline, self.body = spec, spec.pipeline, spec.body
        self.model = model
        self.embed_model = embed_model or spec.pipeline.embed_model or model
        self.rerank_model = rerank_model or spec.pipeline.rerank_model or model
        self.text = text
        self.rng = random.Random(seed)
        self.output_tokens = output_tokens or spec.output_tokens
        self.ignore_eos = spec.ignore_eos if ignore_eos is None else ignore_eos
        self._tag = f"q{seed:x}"
        self._n = 0

    def _text(self, length: int, tag: str) -> str:
        return self.text.text(self.rng, max(1, length), tag=tag)

    def start_task(self) -> PipelineTask:
        b, steps, rng = self.body, self.pipeline.steps, self.rng
        self._n += 1
        task_id = f"{self._tag}t{self._n}"
        q = max(1, int(b.query_tokens.sample(rng)))
        query = self._text(q, f"{task_id}q")
        count = max(1, int(b.documents.sample(rng)))
        lengths = tuple(max(1, int(b.document_tokens.sample(rng))) for _ in range(count))
        docs = tuple(self._text(n, f"{task_id}d{i}") for i, n in enumerate(lengths))
        embed = encode_body(embeddings_body(self.embed_model, [query], b.encoding_format, b.dimensions)) \
            if "embed" in steps else None
        rank = None
        if "rerank" in steps:
            api = self.pipeline.rerank_api
            rank = encode_body(rerank_body(self.rerank_model, query, list(docs), b.top_n) if api == "rerank"
                               else score_body(self.rerank_model, query, list(docs)))
        return PipelineTask(task_id, query, q, docs, lengths, embed, rank)

    def chat_request(self, task: PipelineTask, ranked: list[int] | None = None) -> LLMRequest:
        """The chat call: the ``top_n`` passages ``ranked`` first (all passages' order when None) and the query."""
        top = self.body.top_n or 4
        n = len(task.documents)
        order = [i for i in (ranked or []) if 0 <= i < n][:top] or list(range(n))[:top]
        passages = "\n\n".join(f"[{k + 1}] {task.documents[i]}" for k, i in enumerate(order))
        content = f"{INSTRUCTION}\n\n{passages}\n\nQuestion: {task.query}"
        system = self.spec.system_prompt
        messages = ([{"role": "system", "content": system}] if system else []) + [{"role": "user", "content": content}]
        words_in = len(content.split()) + (len(system.split()) if system else 0)
        max_tokens = int(self.output_tokens.sample(self.rng)) if self.output_tokens is not None else DEFAULT_OUTPUT
        req = LLMRequest(scenario=self.spec.name, max_tokens=max(1, max_tokens), messages=messages, model=self.model,
                         sampling=dict(self.spec.sampling), extra=dict(self.spec.extra), session_id=task.task_id,
                         turn=len(self.pipeline.steps), input_tokens=words_in, step_kind="chat")
        if self.ignore_eos:
            req.extra["ignore_eos"] = True
        return req
