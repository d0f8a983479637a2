"""Structured replies the mock streams: whether a reply calls a tool, and JSON of an exact number
of tokens (``response_format`` replies and tool-call arguments). Pure (seeded).

* :func:`plan_reply` decides a request's reply: a tool call when tools are offered and
  ``tool_choice`` is ``required`` or names a function, or ``auto`` with probability
  ``tool_call_rate`` (never under ``none``); else JSON under ``response_format`` ``json_schema``
  or ``json_object``; else plain text.
* :func:`json_pieces` cuts a JSON text into exactly ``n`` non-empty pieces, one per token, so a
  stream of ``n`` tokens is valid JSON when joined. It fills the schema's top-level properties
  in order (strings get the words, other types one value token each) and falls back to
  ``{"text": "..."}`` when the schema cannot take ``n`` tokens; 1 token is ``{}``.
* A tool call is streamed as vLLM streams it: a first delta with ``index``, ``id``, ``type`` and
  the function ``name`` (the first token), then one ``arguments`` piece per token.

Usage::

    plan = plan_reply(parsed_request, rng, tool_call_rate=0.5)
    pieces = plan.pieces(n_tokens, seed=17)   # None for plain text
"""

from __future__ import annotations

import json
import random
import uuid
from dataclasses import dataclass
from typing import Any

from llmload.mock.api.openai_api import VOCAB

_SCALARS = {"integer": "42", "number": "3.5", "boolean": "true", "array": "[]", "object": "{}", "null": "null"}
MAX_PROPERTIES = 16


def _type_of(prop: Any) -> str:
    t = prop.get("type") if isinstance(prop, dict) else None
    if isinstance(t, list):
        t = next((x for x in t if x != "null"), "null")
    if t is None and isinstance(prop, dict) and "enum" in prop:
        values = prop["enum"]
        return "enum:" + json.dumps(values[0]) if values else "null"
    return t if isinstance(t, str) else "string"


def _words(n: int, seed: int) -> list[str]:
    r = random.Random(seed)
    return [(" " if i else "") + VOCAB[r.randrange(len(VOCAB))] for i in range(n)]


def _generic(n: int, seed: int) -> list[str]:
    if n <= 1:
        return ["{}"]
    return ['{"text": "', *_words(n - 2, seed), '"}']


def json_pieces(n: int, schema: Any = None, seed: int = 0) -> list[str]:
    """``n`` (>= 1) non-empty pieces whose concatenation is one JSON object."""
    props = schema.get("properties") if isinstance(schema, dict) else None
    if not isinstance(props, dict) or not props:
        return _generic(n, seed)
    # The skeleton: structure pieces (a string value's quotes ride on them), value pieces, and
    # the slots where a string value's words go.
    pieces: list[str] = []
    slots: list[int] = []  # index in pieces before which a string's words are inserted
    head = "{"
    for i, (key, prop) in enumerate(list(props.items())[:MAX_PROPERTIES]):
        head += (", " if i else "") + json.dumps(str(key)) + ": "
        kind = _type_of(prop)
        if kind == "string":
            pieces.append(head + '"')
            slots.append(len(pieces))
            head = '"'
        else:
            pieces.append(head)
            pieces.append(kind[5:] if kind.startswith("enum:") else _SCALARS.get(kind, "null"))
            head = ""
    pieces.append(head + "}")
    extra = n - len(pieces)
    if extra < 0 or (extra > 0 and not slots):
        return _generic(n, seed)
    words = _words(extra, seed)
    # spread the words over the string values, the first ones getting the remainder
    out: list[str] = []
    per, rest = divmod(extra, len(slots)) if slots else (0, 0)
    w = 0
    slot_set = {s: k for k, s in enumerate(slots)}
    for i, p in enumerate(pieces):
        if i in slot_set:
            take = per + (1 if slot_set[i] < rest else 0)
            chunk = words[w:w + take]
            if chunk:
                chunk[0] = chunk[0].lstrip()
            out += chunk
            w += take
        out.append(p)
    return out


@dataclass(frozen=True)
class ReplyPlan:
    """What a reply is: ``text``, ``json`` (response_format) or ``tool`` (one tool call)."""

    kind: str = "text"
    schema: Any = None  # JSON schema of the reply or of the tool's arguments
    tool_name: str = ""
    call_id: str = ""

    def pieces(self, n: int, seed: int) -> list[str] | None:
        """One piece per token (None for plain text). A tool call's first piece is the argument
        text sent with the name (empty, or the whole ``{}`` when the reply is one token)."""
        if self.kind == "json":
            return json_pieces(max(n, 1), self.schema, seed)
        if self.kind == "tool":
            return ["{}"] if n <= 1 else ["", *json_pieces(n - 1, self.schema, seed)]
        return None


TEXT = ReplyPlan()


def _function(tool: Any) -> dict[str, Any]:
    fn = tool.get("function") if isinstance(tool, dict) else None
    return fn if isinstance(fn, dict) else {}


def plan_reply(tools: list[Any], tool_choice: Any, response_format: Any, rng: random.Random,
               tool_call_rate: float) -> ReplyPlan:
    """Decide a reply (see the module docstring); ``rng`` is drawn from only under ``auto``."""
    named = _function(tool_choice).get("name") if isinstance(tool_choice, dict) else None
    offered = [t for t in tools if _function(t).get("name")]
    if offered and tool_choice != "none":
        call = named is not None or tool_choice == "required"
        if not call and tool_choice in (None, "auto"):
            call = rng.random() < tool_call_rate
        if call:
            pick = next((t for t in offered if _function(t)["name"] == named), None) if named else None
            tool = pick or offered[rng.randrange(len(offered))]
            fn = _function(tool)
            return ReplyPlan("tool", fn.get("parameters"), str(fn["name"]), f"chatcmpl-tool-{uuid.uuid4().hex}")
    if isinstance(response_format, dict) and response_format.get("type") in ("json_schema", "json_object"):
        js = response_format.get("json_schema")
        schema = js.get("schema") if isinstance(js, dict) else None
        return ReplyPlan("json", schema)
    return TEXT
