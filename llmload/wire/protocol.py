"""The OpenAI wire format going out, pure: the streaming endpoints' request bodies, and the human
part of an error body. (What comes back is :mod:`llmload.wire.sse` and :mod:`llmload.wire.chunks`.)

Usage::

    body = chat_body("my-model", [{"role": "user", "content": "hi"}], max_tokens=64)
    body = responses_body("my-model", [{"role": "user", "content": "hi"}], max_output_tokens=64)
    body = messages_body("my-model", [{"role": "user", "content": "hi"}], max_tokens=64)   # Anthropic's
    data = encode_body(body)
    parse_header("api-key: env:AZURE_KEY")   # ("api-key", the variable's value): a secret
"""

from __future__ import annotations

import json
import os
from typing import Any

# The endpoints themselves (names, paths, what each answers) are declared in llmload.wire.endpoints.
# The Anthropic Messages API: its version header, and where its key goes (not Authorization: Bearer).
ANTHROPIC_VERSION = "2023-06-01"
MESSAGES_KEY_HEADER = "x-api-key"


def chat_body(
    model: str,
    messages: list[dict[str, Any]],
    max_tokens: int | None,
    *,
    stream: bool = True,
    include_usage: bool = True,
    sampling: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Body of a `/v1/chat/completions` request. ``extra`` carries server-specific fields
    (vLLM's ``ignore_eos``, ``min_tokens``); ``sampling`` temperature, top_p, seed, ..."""
    return _body({"model": model, "messages": messages}, max_tokens, stream, include_usage, sampling, extra)


def completions_body(
    model: str,
    prompt: str,
    max_tokens: int | None,
    *,
    stream: bool = True,
    include_usage: bool = True,
    sampling: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Body of a `/v1/completions` request; same options as :func:`chat_body`."""
    return _body({"model": model, "prompt": prompt}, max_tokens, stream, include_usage, sampling, extra)


def responses_body(
    model: str,
    messages: list[dict[str, Any]],
    max_output_tokens: int | None,
    *,
    stream: bool = True,
    sampling: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Body of a `/v1/responses` request: the messages as ``input``; usage comes with
    ``response.completed``, so there is no ``stream_options``."""
    body: dict[str, Any] = {"model": model, "input": messages, "stream": stream}
    if max_output_tokens is not None:
        body["max_output_tokens"] = max_output_tokens
    return _with(body, sampling, extra)


def messages_body(
    model: str,
    messages: list[dict[str, Any]],
    max_tokens: int | None,
    *,
    stream: bool = True,
    sampling: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """Body of an Anthropic `/v1/messages` request: system messages go to the top-level ``system``
    (the API has no system role); usage always comes in the stream (message_start, message_delta).
    ``extra`` carries ``thinking: {type: enabled, budget_tokens: N}``, ``tools``, ..."""
    system = [m.get("content") for m in messages if m.get("role") == "system"]
    body: dict[str, Any] = {"model": model, "messages": [m for m in messages if m.get("role") != "system"]}
    if system:
        body["system"] = "\n\n".join(str(s) for s in system) if all(isinstance(s, str) for s in system) else \
            [part for s in system for part in (s if isinstance(s, list) else [{"type": "text", "text": str(s)}])]
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    body["stream"] = stream
    return _with(body, sampling, extra)


def _body(body: dict[str, Any], max_tokens: int | None, stream: bool, include_usage: bool,
          sampling: dict[str, Any] | None, extra: dict[str, Any] | None) -> dict[str, Any]:
    body["stream"] = stream
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if stream and include_usage:
        body["stream_options"] = {"include_usage": True}
    return _with(body, sampling, extra)


def _with(body: dict[str, Any], sampling: dict[str, Any] | None, extra: dict[str, Any] | None) -> dict[str, Any]:
    """The request's sampling settings, then the server-specific fields: last, so they may override."""
    if sampling:
        body.update(sampling)
    if extra:
        body.update(extra)
    return body


def encode_body(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


def error_message(body: bytes) -> str:
    """The human part of an HTTP error body (OpenAI, vLLM or plain text)."""
    try:
        obj = json.loads(body)
    except (ValueError, UnicodeDecodeError):
        return body.decode("utf-8", "replace").strip()[:300]
    if isinstance(obj, dict):
        err = obj.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])[:300]
        if isinstance(err, str):
            return err[:300]
        if obj.get("message"):
            return str(obj["message"])[:300]
    return json.dumps(obj)[:300]


ENV_PREFIX = "env:"


def parse_header(text: str, where: str = "--header") -> tuple[str, str]:
    """``"Name: value"`` → (name, value); a value ``env:VAR`` is read from the environment."""
    name, sep, value = str(text).partition(":")
    name, value = name.strip(), value.strip()
    if not sep or not name or any(c in name for c in " \t\r\n") or "\r" in value or "\n" in value:
        raise ValueError(f"{where} {text!r}: expected 'Name: value' (a value env:VAR is read from the "
                         "environment)")
    return name, resolve_value(value, f"{where} {name}")


def resolve_value(value: str, where: str) -> str:
    if value.startswith(ENV_PREFIX):
        var = value[len(ENV_PREFIX):].strip()
        if var not in os.environ:
            raise ValueError(f"{where}: environment variable {var} is not set in this process")
        value = os.environ[var]
        if "\r" in value or "\n" in value:
            # a trailing newline from a secret file would end the request head early and corrupt every request
            raise ValueError(f"{where}: environment variable {var} holds a line break (a newline at the end of a "
                             "secret file?); remove it")
    return value
