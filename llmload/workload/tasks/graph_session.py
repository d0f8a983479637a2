"""One user's call-graph sessions: the request of each call, built from what its parents really
answered. Pure (given an RNG); :mod:`llmload.plugin.users.graph_loop` runs the graph.

A call's messages:

* ``fresh``: the system prompt, the shared context (a preset's repository: one text for every
  session of every user, so it is a prefix the engine can cache), then the call's task;
* ``parent``: the first parent's messages and its reply, then each other parent's reply (a join:
  the sub-agents' answers), then the call's new input (a tool result).

``input_tokens`` counts words the way ``llmload mock`` counts prompt tokens.

Usage::

    session = GraphSession(spec, user_seed=5, model="m", text=TextSource(1))
    graph, think_s = session.start()
    req = session.request(graph.calls[0], results={})        # results: call id -> CallResult
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any

from llmload.workload.request import LLMRequest
from llmload.workload.tasks.agent import message_words
from llmload.workload.tasks.call_graph import CallGraph, GraphCall, GraphSpec, sample_graph
from llmload.workload.text import TextSource


@dataclass(frozen=True)
class CallResult:
    """What one call of a session left for the calls after it."""

    messages: tuple[dict[str, Any], ...]  # the prompt it was sent
    reply: str
    ok: bool


class GraphSession:
    """One user's sessions of one workload (``spec.graph`` set)."""

    def __init__(self, spec: Any, user_seed: int, model: str, text: TextSource, system: str | None = None,
                 output_tokens: Any = None, ignore_eos: bool | None = None,
                 shared_text: TextSource | None = None) -> None:
        graph: GraphSpec = spec.graph
        self.spec = spec
        self.graph_spec = graph
        self.model = model
        self.text = text
        self.rng = random.Random(user_seed)
        self.output_tokens = output_tokens or spec.output_tokens
        self.ignore_eos = spec.ignore_eos if ignore_eos is None else ignore_eos
        self._tag = f"g{user_seed:x}"
        self._sessions = 0
        self.session_id = ""
        self._shared_text = shared_text or text  # the same in every process: the shared context is a prefix
        self._head = self._shared_head(system if system is not None else spec.system_prompt)

    def _shared_head(self, system: str | None) -> list[dict[str, Any]]:
        """The system prompt and the shared context: the same words in every process (a fixed RNG)."""
        preset = self.graph_spec.preset
        parts = [system] if system else []
        if preset is not None:
            shared = random.Random(f"{self.spec.name}/shared")
            if preset.system_tokens and not system:
                parts.append(self._shared_text.text(shared, preset.system_tokens, tag=f"{self.spec.name}-system"))
            if preset.shared_context_tokens:
                parts.append(self._shared_text.text(shared, preset.shared_context_tokens,
                                                    tag=f"{self.spec.name}-context"))
        return [{"role": "system", "content": "\n\n".join(parts)}] if parts else []

    def start(self) -> tuple[CallGraph, float]:
        """A new session's graph, and the think time before it (none before the first)."""
        self._sessions += 1
        self.session_id = f"{self._tag}-{self._sessions}"
        think = self.graph_spec.think_time_s
        wait = float(think.sample(self.rng)) if think is not None and self._sessions > 1 else 0.0
        return sample_graph(self.graph_spec, self.rng), wait

    def request(self, call: GraphCall, results: dict[str, CallResult], turn: int) -> LLMRequest:
        """The request of ``call``, its parents' results at hand; ``turn`` is its place (1, 2, ...)."""
        if call.context == "fresh":
            messages = list(self._head)
        else:
            first = results[call.after[0]]
            messages = [*first.messages, {"role": "assistant", "content": first.reply}]
        resent = sum(message_words(m) for m in messages)  # the shared head, or the first parent's turn: sent before
        if call.context != "fresh":
            for other in call.after[1:]:
                messages.append({"role": "user", "content": f"[{other}] {results[other].reply}"})
        kind = "task" if call.fresh_task else "tool result"
        new = self.text.text(self.rng, max(1, call.new_tokens), tag=f"{self.session_id}{call.id}")
        messages.append({"role": "user", "content": f"{kind}: {new}"})
        spec = self.spec
        max_tokens = call.output_tokens
        if max_tokens is None and self.output_tokens is not None:
            max_tokens = int(self.output_tokens.sample(self.rng))
        req = LLMRequest(scenario=spec.name, max_tokens=max_tokens, model=self.model, messages=messages,
                         sampling=dict(spec.sampling), extra=dict(spec.extra), session_id=self.session_id,
                         turn=turn, want_text=True, input_tokens=sum(message_words(m) for m in messages),
                         resent_tokens=resent,
                         wait_s=call.wait_s, step_kind="graph", call_id=call.id, call_after="+".join(call.after))
        if self.ignore_eos:
            req.extra["ignore_eos"] = True
        header = self.graph_spec.affinity_header
        if header:
            req.headers = {header: self.session_id}
        return req
