"""Agent sessions as call graphs (issue 23): a session is a DAG of model calls. Pure (given an RNG).

Each call names the calls it waits for (``after``), its context (``parent``: the first of those
calls' conversation and reply, then the other calls' replies, a join; ``fresh``: the system prompt
and the shared context only, a sub-agent), the new input it adds (a tool result, a task), its
output length, and the tool or think time before it starts (counted from the end of its last
parent). Calls whose parents have all ended run in parallel: a fan-out.

A graph comes either from a scenario's ``calls:`` list (the same shape every session, lengths
drawn per session) or from a preset that draws a different graph per session:

* ``coding-agent``: a long shared system prompt and repository context (shared by every session of
  every user, so most of each prompt is a prefix the engine has seen), a main chain of turns, each
  adding a tool result, and now and then a few sub-agents fanned out and joined by the next turn;
* ``research-agent``: a shorter system prompt, fewer and longer tool results (documents), wider
  and more frequent fan-out.

Usage::

    graph = sample_graph(spec, random.Random(7))        # CallGraph: calls in a topological order
    graph.ready(done={"c1"}, started={"c1"})            # the calls that may start now
    critical_path(graph, {"c1": 1.2, "c2": 0.8}, {"c2": 0.1})   # (seconds, call ids) of the longest chain
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from llmload.workload.distributions import Distribution

CONTEXTS = ("parent", "fresh")
PRESETS = ("coding-agent", "research-agent")
MAX_CALLS = 512  # per session: a graph bigger than this is a typo, not a workload


@dataclass(frozen=True)
class CallTemplate:
    """One call of a ``calls:`` list; lengths and waits are drawn per session."""

    id: str
    after: tuple[str, ...] = ()
    context: str = "parent"  # with no ``after``: fresh
    new_tokens: Distribution | None = None  # words of new input on top of the context
    output_tokens: Distribution | None = None  # max_tokens (None: the workload's output_tokens)
    wait_s: Distribution | None = None  # tool/think time before it starts


@dataclass(frozen=True)
class PresetSpec:
    """A synthetic agent profile; every field is a distribution drawn per session (or per turn)."""

    name: str
    system_tokens: int  # the system prompt, the same for every session
    shared_context_tokens: int  # e.g. the repository: after the system prompt, the same for every session
    task_tokens: Distribution
    turns: Distribution  # calls of the main chain
    tool_result_tokens: Distribution
    tool_latency_s: Distribution
    output_tokens: Distribution
    fanout_p: float  # chance that a main turn fans out to sub-agents
    fanout_width: Distribution


@dataclass(frozen=True)
class GraphSpec:
    """``session: {kind: graph, ...}``: either ``calls`` or ``preset``."""

    calls: tuple[CallTemplate, ...] = ()
    preset: PresetSpec | None = None
    think_time_s: Distribution | None = None  # pause between sessions
    affinity_header: str = ""  # e.g. x-session-id: sent with the session id on every call


@dataclass(frozen=True)
class GraphCall:
    """One call of one session's graph, with its drawn numbers."""

    id: str
    after: tuple[str, ...]
    context: str
    new_tokens: int
    output_tokens: int | None
    wait_s: float
    fresh_task: bool = False  # a fresh call's new input is a task (a sub-agent's), not a tool result
    # A replayed trace's call (llmload.workload.trace.graph_trace) says what to send instead of new_tokens:
    input_tokens: int | None = None  # a prompt of exactly this many words, its blocks from hash_ids
    hash_ids: tuple[int, ...] = ()  # the trace's prefix blocks (equal ids: equal text, a shared prefix)
    messages: tuple[dict, ...] | None = None  # recorded messages: the whole prompt (fresh) or the new ones (parent)
    block_tokens: int = 0  # tokens per hash id (0: the trace section's block_tokens)
    replies: tuple[tuple[int, str], ...] = ()  # (index in messages, call id): that recorded reply, sent live


@dataclass(frozen=True)
class CallGraph:
    calls: tuple[GraphCall, ...]  # topological order: a call comes after every call it waits for

    def by_id(self) -> dict[str, GraphCall]:
        return {c.id: c for c in self.calls}

    def ready(self, done: set[str], started: set[str]) -> list[GraphCall]:
        """Calls not yet started whose parents have all ended."""
        return [c for c in self.calls if c.id not in started and all(p in done for p in c.after)]

    def children(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {c.id: [] for c in self.calls}
        for c in self.calls:
            for p in c.after:
                out[p].append(c.id)
        return out


class GraphError(ValueError):
    """A call graph that cannot run; the message names the call."""


def check_graph(calls: list[GraphCall] | tuple[GraphCall, ...], max_calls: int = MAX_CALLS) -> CallGraph:
    """The calls in a topological order (stable: the given order where it is one), or GraphError
    for a duplicate id, an unknown parent, a cycle, or a ``parent`` context without a parent."""
    if not calls:
        raise GraphError("a call graph needs at least one call")
    if len(calls) > max_calls:
        raise GraphError(f"{len(calls)} calls in one session: at most {max_calls}")
    ids = [c.id for c in calls]
    seen: set[str] = set()
    for c in calls:
        if c.id in seen:
            raise GraphError(f"call {c.id!r}: the id is used twice")
        seen.add(c.id)
    for c in calls:
        for p in c.after:
            if p not in seen:
                raise GraphError(f"call {c.id!r}: waits for {p!r}, which is not a call of this graph "
                                 f"({', '.join(ids)})")
            if p == c.id:
                raise GraphError(f"call {c.id!r}: waits for itself")
        if c.context not in CONTEXTS:
            raise GraphError(f"call {c.id!r}: context {c.context!r}: expected one of {', '.join(CONTEXTS)}")
        if c.context == "parent" and not c.after:
            raise GraphError(f"call {c.id!r}: context parent needs a call in after: (or context: fresh)")
    order: list[GraphCall] = []
    placed: set[str] = set()
    pending = list(calls)
    while pending:
        now = [c for c in pending if all(p in placed for p in c.after)]
        if not now:
            raise GraphError("the calls wait for each other in a cycle: " + ", ".join(
                f"{c.id} after {'+'.join(c.after)}" for c in pending))
        for c in now:
            order.append(c)
            placed.add(c.id)
        pending = [c for c in pending if c.id not in placed]
    return CallGraph(tuple(order))


def critical_path(graph: CallGraph, durations_s: dict[str, float],
                  waits_s: dict[str, float]) -> tuple[float, list[str]]:
    """The longest chain of (wait + call) through the graph: its seconds and its call ids. A call
    missing from ``durations_s`` (not run) counts 0."""
    finish: dict[str, float] = {}
    via: dict[str, str | None] = {}
    for c in graph.calls:
        start, best = 0.0, None
        for p in c.after:
            if finish[p] > start or best is None:
                start, best = max(start, finish[p]), p
        finish[c.id] = start + waits_s.get(c.id, 0.0) + durations_s.get(c.id, 0.0)
        via[c.id] = best
    end = max(finish, key=finish.get)
    path, node = [], end
    while node is not None:
        path.append(node)
        node = via[node]
    return finish[end], path[::-1]


def _int(d: Distribution | None, rng: random.Random, default: int | None) -> int | None:
    return default if d is None else max(0, int(d.sample(rng)))


def sample_graph(spec: GraphSpec, rng: random.Random) -> CallGraph:
    """One session's graph: the ``calls:`` list with numbers drawn, or a preset's drawn graph."""
    if spec.preset is not None:
        return _preset_graph(spec.preset, rng)
    calls = []
    for t in spec.calls:
        calls.append(GraphCall(
            id=t.id, after=t.after, context=t.context if t.after else "fresh",
            new_tokens=_int(t.new_tokens, rng, 0) or 0, output_tokens=_int(t.output_tokens, rng, None),
            wait_s=float(t.wait_s.sample(rng)) if t.wait_s is not None else 0.0,
            fresh_task=not t.after or t.context == "fresh"))
    return check_graph(calls)


def _preset_graph(p: PresetSpec, rng: random.Random) -> CallGraph:
    turns = max(1, int(p.turns.sample(rng)))
    calls = [GraphCall("m1", (), "fresh", max(1, int(p.task_tokens.sample(rng))), _int(p.output_tokens, rng, None),
                       0.0, fresh_task=True)]
    prev = "m1"
    for t in range(2, turns + 1):
        after = [prev]
        if rng.random() < p.fanout_p:  # sub-agents start from the shared context with a task of their own
            for k in range(1, max(1, int(p.fanout_width.sample(rng))) + 1):
                sid = f"m{t}s{k}"
                calls.append(GraphCall(sid, (prev,), "fresh", max(1, int(p.task_tokens.sample(rng))),
                                       _int(p.output_tokens, rng, None), float(p.tool_latency_s.sample(rng)),
                                       fresh_task=True))
                after.append(sid)
        mid = f"m{t}"
        calls.append(GraphCall(mid, tuple(after), "parent", max(1, int(p.tool_result_tokens.sample(rng))),
                               _int(p.output_tokens, rng, None), float(p.tool_latency_s.sample(rng))))
        prev = mid
    return check_graph(calls)
