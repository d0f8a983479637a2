"""``session: {kind: graph, ...}``: agent sessions as call graphs (:mod:`llmload.workload.tasks.call_graph`).

Either a ``calls:`` list (the same graph every session)::

    session:
      kind: graph
      calls:
        - {id: plan, new_tokens: 300, output_tokens: 64}
        - {id: a, after: [plan], context: fresh, new_tokens: 200, wait_s: 0.2}   # a sub-agent
        - {id: b, after: [plan], context: fresh, new_tokens: 200, wait_s: 0.2}
        - {id: answer, after: [plan, a, b], new_tokens: 50}                       # the join
      think_time_s: 1
      affinity_header: x-session-id

or a preset (``coding-agent``, ``research-agent``) with any of its numbers overridden::

    session: {kind: graph, preset: coding-agent, turns: 4-8, fanout_p: 0.3}

Every mistake names the file, the line and the key.
"""

from __future__ import annotations

from typing import Any

from llmload.workload.distributions import Distribution, SpecError, parse_distribution
from llmload.workload.file.yaml_lines import Ctx, choice, keys, number, whole
from llmload.workload.tasks.call_graph import (
    CONTEXTS,
    PRESETS,
    CallTemplate,
    GraphError,
    GraphSpec,
    PresetSpec,
    check_graph,
)
from llmload.workload.tasks.call_graph import GraphCall as _Call

GRAPH_KEYS = {"kind", "calls", "preset", "think_time_s", "affinity_header", "system_tokens", "shared_context_tokens",
              "task_tokens", "turns", "tool_result_tokens", "tool_latency_s", "output_tokens", "fanout_p",
              "fanout_width"}
CALL_KEYS = {"id", "after", "context", "new_tokens", "output_tokens", "wait_s"}
PRESET_DEFAULTS: dict[str, dict[str, Any]] = {
    # a coding agent: a long system prompt and a repository every session shares; many turns of
    # tool results (files, test output); now and then a few sub-agents
    "coding-agent": dict(system_tokens=1500, shared_context_tokens=6000, task_tokens="100-300", turns="6-12",
                         tool_result_tokens="200-1500", tool_latency_s="0.2-1.0", output_tokens="64-256",
                         fanout_p=0.2, fanout_width="2-3"),
    # a research agent: fewer, longer tool results (documents); wider, more frequent fan-out
    "research-agent": dict(system_tokens=600, shared_context_tokens=0, task_tokens="50-150", turns="3-6",
                           tool_result_tokens="1000-3000", tool_latency_s="0.5-2.0", output_tokens="128-512",
                           fanout_p=0.5, fanout_width="3-5"),
}


def _dist(ctx: Ctx, d: dict, key: str, path: str, default: Any, integer: bool = True,
          minimum: float = 0) -> Distribution:
    try:
        return parse_distribution(d.get(key, default), f"{path}.{key}", integer=integer, minimum=minimum)
    except SpecError as e:
        raise ctx.error(e.path, e.message) from None


def parse_graph(ctx: Ctx, raw: Any, path: str) -> GraphSpec:
    g = keys(ctx, raw, path, GRAPH_KEYS)
    header = g.get("affinity_header", "")
    if not isinstance(header, str) or (header and not header.replace("-", "").replace("_", "").isalnum()):
        raise ctx.error(f"{path}.affinity_header", f"expected a header name like x-session-id, got {header!r}")
    think = _dist(ctx, g, "think_time_s", path, 0, integer=False)
    if ("calls" in g) == ("preset" in g):
        raise ctx.error(path, "a graph session needs either calls: (a list of calls) or preset: "
                        f"({' or '.join(PRESETS)})" + (", not both" if "calls" in g else ""))
    if "preset" in g:
        return GraphSpec(preset=_parse_preset(ctx, g, path), think_time_s=think, affinity_header=header)
    extra = sorted(set(g) & (GRAPH_KEYS - {"kind", "calls", "think_time_s", "affinity_header"}))
    if extra:
        raise ctx.error(f"{path}.{extra[0]}", "is a preset's setting: with calls:, give each call its own numbers")
    return GraphSpec(calls=_parse_calls(ctx, g["calls"], f"{path}.calls"), think_time_s=think,
                     affinity_header=header)


def _parse_preset(ctx: Ctx, g: dict, path: str) -> PresetSpec:
    name = choice(ctx, g, "preset", path, PRESETS, PRESETS[0])
    d = {**PRESET_DEFAULTS[name], **{k: v for k, v in g.items() if k in PRESET_DEFAULTS[name]}}
    p = number(ctx, d, "fanout_p", path, default=0.0)
    if not 0.0 <= p <= 1.0:
        raise ctx.error(f"{path}.fanout_p", f"expected a probability 0..1, got {p!r}")
    return PresetSpec(
        name=name,
        system_tokens=whole(ctx, d, "system_tokens", path, default=0, minimum=0),
        shared_context_tokens=whole(ctx, d, "shared_context_tokens", path, default=0, minimum=0),
        task_tokens=_dist(ctx, d, "task_tokens", path, 100, minimum=1),
        turns=_dist(ctx, d, "turns", path, 4, minimum=1),
        tool_result_tokens=_dist(ctx, d, "tool_result_tokens", path, 200, minimum=1),
        tool_latency_s=_dist(ctx, d, "tool_latency_s", path, 0.2, integer=False),
        output_tokens=_dist(ctx, d, "output_tokens", path, 128, minimum=1),
        fanout_p=p,
        fanout_width=_dist(ctx, d, "fanout_width", path, 2, minimum=1),
    )


def _parse_calls(ctx: Ctx, raw: Any, path: str) -> tuple[CallTemplate, ...]:
    if not isinstance(raw, list) or not raw:
        raise ctx.error(path, f"expected a list of calls ({{id: ..., after: [...], new_tokens: ...}}), got {raw!r}")
    out = []
    for i, item in enumerate(raw):
        where = f"{path}[{i}]"
        c = keys(ctx, item, where, CALL_KEYS)
        cid = c.get("id")
        if not isinstance(cid, str) or not cid or "+" in cid:
            raise ctx.error(f"{where}.id", f"expected a name without '+', got {cid!r}")
        after = c.get("after", [])
        after = [after] if isinstance(after, str) else after
        if not isinstance(after, list) or not all(isinstance(a, str) for a in after):
            raise ctx.error(f"{where}.after", f"expected a list of call ids, got {after!r}")
        context = choice(ctx, c, "context", where, CONTEXTS, "parent" if after else "fresh")
        out.append(CallTemplate(
            id=cid, after=tuple(after), context=context,
            new_tokens=_dist(ctx, c, "new_tokens", where, 100, minimum=1),
            output_tokens=_dist(ctx, c, "output_tokens", where, None, minimum=1) if "output_tokens" in c else None,
            wait_s=_dist(ctx, c, "wait_s", where, 0, integer=False)))
    try:  # the shape is checked once, here, with the file's line: not in every session
        check_graph([_Call(t.id, t.after, t.context, 1, None, 0.0) for t in out])
    except GraphError as e:
        raise ctx.error(path, str(e)) from None
    return tuple(out)
