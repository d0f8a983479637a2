"""Hypothesis strategies for the fuzz tier: mutations of the seed corpus and small grammars of what
each parser reads, so examples are near-valid (they get past the first check) as well as garbage."""

from __future__ import annotations

import json
import math

from hypothesis import strategies as st

HOSTILE_NUMBERS = (0, -1, 1, 2 ** 31, 2 ** 32, 2 ** 53 + 1, 2 ** 63 - 1, 2 ** 64 - 1, -(2 ** 63), 10 ** 30, 1.5, -0.0,
                   1e308, math.nan, math.inf, -math.inf)
HOSTILE_TEXT = ("", " ", "\x00", "\ud800".encode("utf-8", "surrogatepass").decode("utf-8", "replace"), "é" * 3,
                "=HYPERLINK(1)", "yesterday", "x" * 5000, "\r\n", "[DONE]", "null", "NaN")


@st.composite
def mutated(draw, corpus: tuple[bytes, ...], max_edits: int = 4) -> bytes:
    """A corpus item with up to ``max_edits`` byte edits: flips, cuts, insertions, repeats, splices."""
    b = bytearray(draw(st.sampled_from(corpus)))
    for _ in range(draw(st.integers(0, max_edits))):
        op = draw(st.sampled_from(("flip", "delete", "insert", "repeat", "truncate", "splice")))
        i = draw(st.integers(0, len(b)))
        if op == "flip" and b:
            i = min(i, len(b) - 1)
            b[i] = draw(st.integers(0, 255))
        elif op == "delete":
            j = draw(st.integers(i, min(len(b), i + 64)))
            del b[i:j]
        elif op == "insert":
            b[i:i] = draw(st.sampled_from((b"\r", b"\n", b"\r\n", b"\x00", b":", b'"', b"{", b"}", b" ", b"\xff",
                                           b"data: ", b"event: x\n", b"0\r\n\r\n", b"\\"))
                           | st.binary(max_size=16))
        elif op == "repeat":
            j = draw(st.integers(i, min(len(b), i + 256)))
            b[i:i] = b[i:j] * draw(st.integers(1, 4))
        elif op == "truncate":
            del b[i:]
        elif op == "splice":
            other = draw(st.sampled_from(corpus))
            k = draw(st.integers(0, len(other)))
            b[i:] = other[k:]
    return bytes(b)


def cuts(n: int):
    """Sorted byte offsets in 0..n (where a stream is split between reads)."""
    return st.lists(st.integers(0, n), max_size=8).map(sorted)


@st.composite
def with_cuts(draw, data_strategy):
    data = draw(data_strategy)
    return data, draw(cuts(len(data)))


def pieces(data: bytes, at: list[int]) -> list[bytes]:
    out, prev = [], 0
    for c in [*at, len(data)]:
        out.append(data[prev:c])
        prev = c
    return out


json_scalars = (st.none() | st.booleans() | st.integers(-(2 ** 70), 2 ** 70) | st.sampled_from(HOSTILE_NUMBERS)
                | st.floats(allow_nan=True, allow_infinity=True) | st.text(max_size=20) | st.sampled_from(HOSTILE_TEXT))
json_values = st.recursive(json_scalars, lambda kids: st.lists(kids, max_size=4)
                           | st.dictionaries(st.text(max_size=12), kids, max_size=4), max_leaves=20)


def dumps(obj) -> bytes:
    """JSON as servers write it: compact, NaN/Infinity as Python (and some servers) write them."""
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")


@st.composite
def mutated_json(draw, obj, hostile=json_values):
    """``obj`` with up to three of its values (at any depth) replaced, removed, or given a sibling."""
    obj = json.loads(json.dumps(obj))  # a deep copy
    for _ in range(draw(st.integers(1, 3))):
        path = []
        node = obj
        while isinstance(node, dict | list) and node and draw(st.booleans()):
            key = draw(st.sampled_from(sorted(node, key=str) if isinstance(node, dict) else range(len(node))))
            path.append((node, key))
            node = node[key]
        if not path:
            if isinstance(obj, dict):
                obj[draw(st.text(max_size=8))] = draw(hostile)
            continue
        parent, key = path[-1]
        op = draw(st.sampled_from(("replace", "replace", "remove", "add")))
        if op == "replace":
            parent[key] = draw(hostile)
        elif op == "remove":
            del parent[key]
        elif isinstance(parent, dict):
            parent[draw(st.text(max_size=8))] = draw(hostile)
        else:
            parent.append(draw(hostile))
    return obj


# -- chat chunks, near-valid ------------------------------------------------------------------------
_content = st.one_of(st.none(), st.just(""), st.text(max_size=8), st.sampled_from(('"', '\\"x', "a\nb", "}")))
_tool_call = st.fixed_dictionaries({"index": st.integers(0, 3)},
                                   optional={"id": st.text(max_size=6), "type": st.just("function"),
                                             "function": st.fixed_dictionaries({}, optional={
                                                 "name": st.text(max_size=6), "arguments": st.text(max_size=8)})})
_delta = st.fixed_dictionaries({}, optional={"role": st.sampled_from(("assistant", None)), "content": _content,
                                             "reasoning_content": _content, "reasoning": _content,
                                             "tool_calls": st.none() | st.lists(_tool_call, max_size=2)})
_choice = st.fixed_dictionaries({"index": st.integers(0, 2)}, optional={
    "delta": _delta, "text": _content, "logprobs": st.none(),
    "finish_reason": st.sampled_from((None, None, "stop", "length", "tool_calls", ""))})
_usage = st.fixed_dictionaries({}, optional={"prompt_tokens": st.sampled_from((0, 7, 2 ** 32, -1, 1.5, None, "3")),
                                             "completion_tokens": st.sampled_from((0, 9, 12.0, math.nan, True)),
                                             "prompt_tokens_details": st.none() | st.fixed_dictionaries(
                                                 {}, optional={"cached_tokens": st.sampled_from((0, 4, 2 ** 64))})})
chat_chunks = st.fixed_dictionaries({"choices": st.lists(_choice, max_size=2)}, optional={
    "id": st.text(max_size=8), "object": st.sampled_from(("chat.completion.chunk", "text_completion", "error")),
    "created": st.integers(0, 2 ** 31), "model": st.text(max_size=8), "usage": st.none() | _usage,
    "error": st.none() | st.sampled_from(({"message": "boom"}, "boom", "")), "system_fingerprint": st.text(max_size=4)})
