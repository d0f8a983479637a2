"""Datasets: ShareGPT-format JSON (every turn) and JSONL of prompts or message lists.

A dataset becomes a list of conversations; each conversation is a list of user turns, each
with the length (words) of the reply the dataset had for it, when it had one. Length filters
apply to the first user turn, in words (the mock's token count; about tokens for real ones).

JSONL lines: ``{"prompt": "..."}``, ``{"messages": [{"role": ..., "content": ...}, ...]}``
(user turns are replayed, other roles kept only as a leading system prompt), optionally with
``"output_tokens": N``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

from llmload.workload.spec import DatasetSpec, ScenarioError


@dataclass(frozen=True)
class Turn:
    text: str
    reply_words: int | None


@dataclass(frozen=True)
class Conversation:
    turns: tuple[Turn, ...]
    system: str | None = None


def _words(text: str) -> int:
    return len(text.split())


def load_dataset(spec: DatasetSpec) -> list[Conversation]:
    try:
        with open(spec.path, encoding="utf-8") as f:
            raw = f.read()
    except OSError as e:
        raise ScenarioError(f"{spec.path}: cannot read the dataset: {e.strerror}") from None
    convs = _sharegpt(raw, spec.path) if spec.format == "sharegpt" else _jsonl(raw, spec.path)
    out = []
    for c in convs:
        if not c.turns:
            continue
        n = _words(c.turns[0].text)
        if n < spec.min_input_tokens or (spec.max_input_tokens is not None and n > spec.max_input_tokens):
            continue
        if spec.turns == "first":
            c = Conversation(turns=c.turns[:1], system=c.system)
        out.append(c)
        if spec.limit is not None and len(out) >= spec.limit:
            break
    if not out:
        raise ScenarioError(f"{spec.path}: no conversation passes the filters (min_input_tokens "
                            f"{spec.min_input_tokens}, max_input_tokens {spec.max_input_tokens})")
    return out


def _sharegpt(raw: str, path: str) -> list[Conversation]:
    try:
        data = json.loads(raw)
    except ValueError as e:
        raise ScenarioError(f"{path}: not valid JSON: {e}") from None
    if not isinstance(data, list):
        raise ScenarioError(f"{path}: expected a JSON list of conversations (ShareGPT format)")
    convs = []
    for i, item in enumerate(data):
        turns = item.get("conversations") if isinstance(item, dict) else None
        if not isinstance(turns, list):
            raise ScenarioError(f"{path}: item {i}: expected an object with a 'conversations' list")
        users: list[Turn] = []
        system = None
        pending: str | None = None
        for t in turns:
            if not isinstance(t, dict) or not isinstance(t.get("value"), str):
                raise ScenarioError(f"{path}: item {i}: each turn needs 'from' and a text 'value'")
            who = t.get("from")
            if who in ("human", "user"):
                if pending is not None:
                    users.append(Turn(pending, None))
                pending = t["value"]
            elif who in ("gpt", "assistant", "chatgpt", "bing", "bard") and pending is not None:
                users.append(Turn(pending, _words(t["value"])))
                pending = None
            elif who == "system" and not users and pending is None:
                system = t["value"]
        if pending is not None:
            users.append(Turn(pending, None))
        convs.append(Conversation(tuple(users), system))
    return convs


def _jsonl(raw: str, path: str) -> list[Conversation]:
    convs = []
    for n, line in enumerate(raw.splitlines(), 1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
        except ValueError as e:
            raise ScenarioError(f"{path}:{n}: not valid JSON: {e}") from None
        out = obj.get("output_tokens") if isinstance(obj, dict) else None
        if isinstance(obj, dict) and isinstance(obj.get("prompt"), str):
            convs.append(Conversation((Turn(obj["prompt"], out),)))
        elif isinstance(obj, dict) and isinstance(obj.get("messages"), list):
            system = None
            turns = []
            for m in obj["messages"]:
                if not isinstance(m, dict) or not isinstance(m.get("content"), str):
                    raise ScenarioError(f"{path}:{n}: each message needs a role and a text content")
                if m.get("role") == "user":
                    turns.append(Turn(m["content"], None))
                elif m.get("role") == "system" and not turns:
                    system = m["content"]
                elif m.get("role") == "assistant" and turns:
                    turns[-1] = Turn(turns[-1].text, _words(m["content"]))
            if turns and out is not None:
                turns[-1] = Turn(turns[-1].text, out)
            convs.append(Conversation(tuple(turns), system))
        else:
            raise ScenarioError(f"{path}:{n}: expected an object with a 'prompt' text or a 'messages' list")
    return convs
