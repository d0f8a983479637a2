"""The embeddings API (``POST /v1/embeddings``), pure: the request body, and what a response must be
for the request to count: one vector per input, every index once, each of the right dimension
(``dimensions`` when asked for, else all of one length), floats or base64 of little-endian float32
as ``encoding_format`` asked; the prompt's tokens from ``usage``.

Usage::

    body = embeddings_body("bge-m3", ["a text", "another"], encoding_format="float", dimensions=256)
    check = check_embeddings(response_bytes, inputs=2, dimensions=256, encoding_format="float")
    check.error          # None, or what is wrong ("2 inputs, 1 vector")
    check.prompt_tokens  # usage.prompt_tokens, or None
"""

from __future__ import annotations

import base64
import binascii
import json
from dataclasses import dataclass
from typing import Any

from llmload.wire.chunks import UsageError, checked_count

ENCODING_FORMATS = ("float", "base64")
_FLOAT32 = 4


def embeddings_body(model: str, inputs: list[str], encoding_format: str = "float", dimensions: int | None = None,
                    extra: dict[str, Any] | None = None) -> dict[str, Any]:
    """The body of one ``/v1/embeddings`` request: a batch of ``inputs``."""
    body: dict[str, Any] = {"model": model, "input": inputs, "encoding_format": encoding_format}
    if dimensions is not None:
        body["dimensions"] = dimensions
    if extra:
        body.update(extra)
    return body


@dataclass(frozen=True, slots=True)
class EmbeddingsCheck:
    """What a response said: ``error`` (None when every input got its vector) and the usage's prompt tokens."""

    error: str | None
    prompt_tokens: int | None = None
    dimension: int | None = None


def _length(vector: Any, encoding_format: str, where: str) -> int:
    """The dimension of one vector as sent; raises ValueError saying what is wrong with it."""
    if encoding_format == "base64":
        if not isinstance(vector, str):
            raise ValueError(f"{where}: expected a base64 string (encoding_format base64), got "
                             f"{type(vector).__name__}")
        try:
            raw = base64.b64decode(vector, validate=True)
        except (binascii.Error, ValueError):
            raise ValueError(f"{where}: not valid base64") from None
        if len(raw) % _FLOAT32:
            raise ValueError(f"{where}: {len(raw)} bytes is not a whole number of float32 values")
        return len(raw) // _FLOAT32
    if not isinstance(vector, list):
        raise ValueError(f"{where}: expected a list of numbers, got {type(vector).__name__}")
    # one pass with a type test per value: this runs once per vector, not per token, and a garbled
    # vector (strings, nulls) must not pass for a short one
    for x in vector:
        if type(x) is not float and type(x) is not int:
            raise ValueError(f"{where}: expected numbers, got {json.dumps(x)[:40]}")
    return len(vector)


def check_embeddings(body: bytes, inputs: int, dimensions: int | None = None,
                     encoding_format: str = "float") -> EmbeddingsCheck:
    """Hold a response's body to the request: ``inputs`` vectors with indices 0..inputs-1, each of
    ``dimensions`` values (or all of one non-zero length when no dimension was asked for)."""
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError) as e:
        return EmbeddingsCheck(f"the body is not JSON: {e.__class__.__name__}: {e}"[:200])
    if not isinstance(obj, dict) or not isinstance(obj.get("data"), list):
        return EmbeddingsCheck("expected a JSON object with a data list")
    prompt_tokens = None
    usage = obj.get("usage")
    if isinstance(usage, dict):
        try:
            prompt_tokens = checked_count(usage.get("prompt_tokens"), "prompt_tokens")
        except UsageError as e:
            return EmbeddingsCheck(str(e))
    data = obj["data"]
    if len(data) != inputs:
        return EmbeddingsCheck(f"{inputs} inputs, {len(data)} vectors", prompt_tokens)
    seen: set[int] = set()
    width = dimensions
    for i, item in enumerate(data):
        if not isinstance(item, dict):
            return EmbeddingsCheck(f"data[{i}]: expected an object", prompt_tokens)
        index = item.get("index", i)
        if type(index) is not int or not 0 <= index < inputs or index in seen:
            return EmbeddingsCheck(f"data[{i}].index: {json.dumps(index)[:40]} is not a new index in 0..{inputs - 1}",
                                   prompt_tokens)
        seen.add(index)
        try:
            n = _length(item.get("embedding"), encoding_format, f"data[{i}].embedding")
        except ValueError as e:
            return EmbeddingsCheck(str(e), prompt_tokens)
        if n == 0:
            return EmbeddingsCheck(f"data[{i}].embedding: an empty vector", prompt_tokens)
        if width is None:
            width = n
        if n != width:
            want = f"{width} (dimensions)" if dimensions is not None else f"{width}, as data[0]'s"
            return EmbeddingsCheck(f"data[{i}].embedding: {n} values, expected {want}", prompt_tokens)
    return EmbeddingsCheck(None, prompt_tokens, width)
