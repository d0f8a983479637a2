"""Tokenize (``POST /tokenize``), pure: the request in vLLM's shape or llama.cpp's, and what an answer
must be to count.

* vLLM (``vllm/entrypoints/serve/tokenize/protocol.py``): ``TokenizeCompletionRequest`` takes
  ``model`` and ``prompt`` (``add_special_tokens`` defaults to true: a BOS is counted as the model
  would count it); ``TokenizeResponse`` is ``count``, ``max_model_len``, ``tokens`` (ids) and
  ``token_strs`` (None unless asked for).
* llama.cpp (``tools/server/server-context.cpp``, ``post_tokenize``): ``content``; the answer is
  ``tokens``, ids, or ``{id, piece}`` objects when ``with_pieces`` is set. ``model`` is what its
  router reads to pick a model, and a single-model server leaves it alone.

An answer counts when ``tokens`` is a list of token ids (whole numbers ≥ 0, or objects with one as
``id``), at least one for the text sent, with ``count`` (where the server gives it) equal to its
length; its length is the row's ``prompt_tokens``.

Usage::

    body = tokenize_body("Qwen/Qwen3-0.6B", "some text", "vllm")      # {"model", "prompt"}
    body = tokenize_body("tiny", "some text", "llamacpp")              # {"model", "content"}
    check = check_tokenize(answer_bytes)                               # TokenizeCheck(error=None, prompt_tokens=3)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

FORMATS = ("vllm", "llamacpp")
TEXT_FIELD = {"vllm": "prompt", "llamacpp": "content"}


def tokenize_body(model: str, text: str, fmt: str = "vllm") -> dict[str, Any]:
    return {"model": model, TEXT_FIELD[fmt]: text}


@dataclass(frozen=True, slots=True)
class TokenizeCheck:
    error: str | None
    prompt_tokens: int | None = None


def _token_id(item: Any) -> int | None:
    value = item.get("id") if isinstance(item, dict) else item  # llama.cpp's with_pieces: {id, piece}
    return value if type(value) is int and value >= 0 else None


def check_tokenize(body: bytes) -> TokenizeCheck:
    """A ``/tokenize`` answer held to its request (one non-empty text): its token ids and their count."""
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        return TokenizeCheck(f"the body is not JSON: {e.__class__.__name__}: {e}"[:200])
    tokens = obj.get("tokens") if isinstance(obj, dict) else None
    if not isinstance(tokens, list):
        return TokenizeCheck("expected a JSON object with a tokens list")
    for i, item in enumerate(tokens):
        if _token_id(item) is None:
            return TokenizeCheck(f"tokens[{i}]: {json.dumps(item)[:40]} is not a token id (a whole number >= 0)")
    n = len(tokens)
    if not n:
        return TokenizeCheck("no tokens for a text that has some")
    count = obj.get("count")
    if count is not None and count != n:  # vLLM's answer says how many; it must be the list's length
        return TokenizeCheck(f"count {json.dumps(count)[:40]} but {n} tokens", n)
    return TokenizeCheck(None, n)
