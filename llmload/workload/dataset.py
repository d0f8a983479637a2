"""Datasets: ShareGPT-format JSON (every turn) and JSONL of prompts or message lists.

A dataset becomes a list of conversations; each conversation is a list of user turns, each
with the length (words) of the reply the dataset had for it, when it had one. Length filters
apply to the first user turn, in words (the mock's token count; about tokens for real ones).

Files that are not regular files, not UTF-8, or too big to read into memory (``MAX_BYTES``; a
JSONL file with ``limit:`` is read only as far as needed) get one clear error each.

JSONL lines: ``{"prompt": "..."}``, ``{"messages": [{"role": ..., "content": ...}, ...]}``
(user turns are replayed, other roles kept only as a leading system prompt), optionally with
``"output_tokens": N``.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from typing import BinaryIO

from llmload.workload.file.spec import DatasetSpec, ScenarioError
from llmload.workload.json_text import json_value


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


MAX_BYTES = 1 << 30  # read whole into memory (JSON; JSONL without limit:): beyond this, one clear error


def _read(spec: DatasetSpec) -> str:
    path = spec.path
    try:
        st = os.stat(path)
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read the dataset: {e.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise ScenarioError(f"{path}: cannot read the dataset: not a regular file")
    whole_file = spec.format == "sharegpt" or spec.limit is None
    if whole_file and st.st_size > MAX_BYTES:
        hint = "split it, or convert it to JSONL and set limit:" if spec.format == "sharegpt" else "set limit:"
        raise ScenarioError(f"{path}: the dataset is {st.st_size / (1 << 30):.1f} GiB, over the "
                            f"{MAX_BYTES >> 30} GiB read into memory; {hint}")
    try:
        with open(path, "rb") as f:
            if whole_file:
                data = f.read()
            else:  # JSONL with limit: read lines until enough conversations could pass
                data = b"".join(_head_lines(f, spec.limit))
        return data.decode("utf-8")
    except OSError as e:
        raise ScenarioError(f"{path}: cannot read the dataset: {e.strerror}") from None
    except UnicodeDecodeError as e:
        raise ScenarioError(f"{path}: not UTF-8 text (byte {e.start}): expected ShareGPT JSON or JSONL") from None


def _head_lines(f: BinaryIO, limit: int) -> list[bytes]:
    """Enough of a big JSONL file for ``limit`` conversations after filters (100 × limit lines)."""
    out, total = [], 0
    for line in f:
        out.append(line)
        total += len(line)
        if len(out) >= 100 * limit or total > MAX_BYTES:
            break
    return out


def load_dataset(spec: DatasetSpec) -> list[Conversation]:
    raw = _read(spec)
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
    data = json_value(raw, path, ScenarioError)
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
        obj = json_value(line, f"{path}:{n}", ScenarioError)
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
