"""OpenTelemetry GenAI spans (inference-perf's OTel trace replay, kubernetes-sigs/inference-perf
PR #372, ``datagen/replay/otel_trace_to_replay_graph.py``) as call-graph sessions. Pure.

One JSON object per trace: ``trace_id`` and ``spans``, each with ``span_id``, ``start_time`` and
``end_time`` (ISO 8601), ``status.code`` and ``attributes`` of the GenAI conventions. What
the graph is, as inference-perf builds it:

* an LLM call is a span whose ``gen_ai.operation.name`` is ``chat`` (or whose name starts with
  ``chat ``) and that has ``gen_ai.input.messages``; identical spans (same start, end and
  attributes) count once; calls in order of (start, span id);
* causal edges: call B waits for an earlier call A when one of B's assistant messages contains A's
  output text (``gen_ai.output.messages`` or ``gen_ai.output.text``); A's causal ancestors are
  not tested again (only direct parents);
* a temporal edge: B also waits for the closest earlier call that ended before B started;
* the gap is B's start minus its last parent's end (a root's: from the trace's first call).

What is sent: the recorded input messages, each assistant message that is exactly an ancestor
call's output replaced by that call's live reply (inference-perf's output substitution; a message
that only contains an output, among other text, is sent as recorded), ``max_tokens`` =
``gen_ai.usage.completion_tokens`` (or ``output_tokens``), else the output text's length at 4
characters a token, else ``gen_ai.request.max_tokens``.

Usage::

    entries = read_otel(json.load(open(path)), path, 0)      # one TraceRequest per trace
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from llmload.workload.trace.formats import TraceRequest
from llmload.workload.trace.graph_trace import RecordedCall, err, message_list, session_entry


def _time(v: object, name: str, key: str) -> float:
    if not isinstance(v, str):
        raise err(name, key, "an ISO 8601 time like 2026-02-25T10:00:00.000000Z", v)
    try:
        dt = datetime.fromisoformat(v.replace("Z", "+00:00"))
    except ValueError:
        raise err(name, key, "an ISO 8601 time like 2026-02-25T10:00:00.000000Z", v) from None
    return (dt if dt.tzinfo else dt.replace(tzinfo=UTC)).timestamp()


def _text(content: object) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "".join(p.get("text", "") if isinstance(p, dict) else str(p) for p in content)
    return "" if content is None else str(content)


def _output(attrs: dict, name: str, key: str) -> str:
    out = attrs.get("gen_ai.output.messages")
    if out:
        msgs = message_list(out, name, f"{key}.gen_ai.output.messages")
        return "".join(_text(m.get("content")) for m in msgs if m.get("role") == "assistant")
    return _text(attrs.get("gen_ai.output.text"))


def _is_llm(span: dict) -> bool:
    attrs = span.get("attributes") or {}
    op = attrs.get("gen_ai.operation.name")
    named = op == "chat" or str(span.get("name") or "").startswith("chat ")
    return named and bool(attrs.get("gen_ai.input.messages"))


def read_otel(obj: dict, name: str, index: int) -> list[TraceRequest]:
    spans = obj.get("spans")
    if not isinstance(spans, list):
        raise err(name, "spans", "a list of spans", spans)
    seen: set[str] = set()
    calls = []  # (start, span id, end, messages, output text, output tokens)
    for i, s in enumerate(spans):
        key = f"spans[{i}]"
        if not isinstance(s, dict):
            raise err(name, key, "a span object", s)
        if not isinstance(s.get("attributes") or {}, dict):
            raise err(name, f"{key}.attributes", "an object (the span's attributes)", s["attributes"])
        if not _is_llm(s):
            continue
        attrs = s["attributes"]
        sig = f"{s.get('start_time')}|{s.get('end_time')}|{json.dumps(attrs, sort_keys=True, default=str)}"
        if sig in seen:
            continue
        seen.add(sig)
        start = _time(s.get("start_time"), name, f"{key}.start_time")
        end = _time(s["end_time"], name, f"{key}.end_time") if s.get("end_time") else start
        messages = message_list(attrs["gen_ai.input.messages"], name, f"{key}.attributes.gen_ai.input.messages")
        out_text = _output(attrs, name, f"{key}.attributes")
        n_out = attrs.get("gen_ai.usage.completion_tokens", attrs.get("gen_ai.usage.output_tokens"))
        if n_out is None:
            n_out = max(1, len(out_text) // 4) if out_text else attrs.get("gen_ai.request.max_tokens")
        if isinstance(n_out, bool) or not isinstance(n_out, int | float) or n_out < 0:
            raise err(name, f"{key}.attributes.gen_ai.usage.completion_tokens", "a whole number of tokens", n_out)
        calls.append((start, str(s.get("span_id") or f"s{i}"), end, messages, out_text, int(n_out)))
    if not calls:
        raise err(name, "spans", "at least one LLM span (gen_ai.operation.name chat, with gen_ai.input.messages)",
                  len(spans))
    calls.sort(key=lambda c: (c[0], c[1]))
    ids = [f"c{i}" for i in range(len(calls))]
    parents: list[dict[int, bool]] = [{} for _ in calls]  # index -> causal?
    for i in range(1, len(calls)):
        skip: set[int] = set()
        for j in range(i - 1, -1, -1):
            if j in skip or not _feeds(calls[j][4], calls[i][3]):
                continue
            parents[i][j] = True
            skip |= _causal_ancestors(parents, j)
        for j in range(i - 1, -1, -1):  # the closest earlier call that had ended
            if calls[i][0] >= calls[j][2]:
                parents[i].setdefault(j, False)
                break
    recorded = [RecordedCall(ids[i], tuple(ids[j] for j in sorted(parents[i])), c[0], c[2], c[5], messages=c[3],
                             replies=_replies(calls, parents, i, ids)) for i, c in enumerate(calls)]
    sid = str(obj.get("trace_id") or calls[0][1] or f"trace{index}")
    return [session_entry(sid, recorded, name)]


def _replies(calls: list, parents: list[dict[int, bool]], i: int, ids: list[str]) -> tuple[tuple[int, str], ...]:
    """Output substitution, as inference-perf does by default: an assistant message of call i that is
    exactly an ancestor's output is sent as that ancestor's live reply (the latest such ancestor)."""
    ancestors: set[int] = set()
    stack = list(parents[i])
    while stack:
        p = stack.pop()
        if p not in ancestors:
            ancestors.add(p)
            stack.extend(parents[p])
    out = []
    for k, m in enumerate(calls[i][3]):
        if m.get("role") != "assistant":
            continue
        text = _text(m.get("content"))
        match = [j for j in ancestors if text and calls[j][4] == text]
        if match:
            out.append((k, ids[max(match)]))
    return tuple(out)


def _feeds(output: str, messages: tuple[dict, ...]) -> bool:
    """inference-perf's causal test: an assistant message of B holds all of A's output text."""
    return bool(output) and any(m.get("role") == "assistant" and output in _text(m.get("content")) for m in messages)


def _causal_ancestors(parents: list[dict[int, bool]], j: int) -> set[int]:
    out: set[int] = set()
    stack = [p for p, causal in parents[j].items() if causal]
    while stack:
        p = stack.pop()
        if p not in out:
            out.add(p)
            stack.extend(q for q, causal in parents[p].items() if causal)
    return out
