"""The OpenAI wire format, pure: request bodies out, SSE bytes in → typed chunks.

Usage::

    body = chat_body("my-model", [{"role": "user", "content": "hi"}], max_tokens=64)
    decoder = SSEDecoder()
    for payload in decoder.feed(b'data: {"choices":[{"delta":{"content":"Hi"}}]}\\n\\n'):
        chunk = classify(payload)      # Chunk(output=True, visible=True, ...)

``classify`` decides the common case, a plain content delta with no finish reason, from the
bytes alone (no ``json.loads``): that is most chunks of every stream, and skipping the parse
saves ~17 % of the client's CPU per token (../shared/HOTPATH.md). Anything else is parsed.
The byte test is structural (escaped quotes inside text never match its keys) but does not
validate the whole object: a broken event that still has every marker and ends in ``}``
would pass as content.
"""

from __future__ import annotations

import json
from typing import Any

# The endpoints llmload streams from, by the name --endpoint and scenario files use.
ENDPOINTS = {"chat": "/v1/chat/completions", "completions": "/v1/completions"}


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


def _body(body: dict[str, Any], max_tokens: int | None, stream: bool, include_usage: bool,
          sampling: dict[str, Any] | None, extra: dict[str, Any] | None) -> dict[str, Any]:
    body["stream"] = stream
    if max_tokens is not None:
        body["max_tokens"] = max_tokens
    if stream and include_usage:
        body["stream_options"] = {"include_usage": True}
    if sampling:
        body.update(sampling)
    if extra:
        body.update(extra)
    return body


def encode_body(body: dict[str, Any]) -> bytes:
    return json.dumps(body, separators=(",", ":"), ensure_ascii=False).encode()


class Chunk:
    """What one SSE event means for the metrics.

    ``output``: carries generated output (content, reasoning, tool calls, completion text);
    ``visible``: carries non-empty ``content``/``text``; ``done``: the ``[DONE]`` sentinel;
    ``bad``: the event could not be parsed (protocol error); ``tool_calls``: the event's
    ``delta.tool_calls`` pieces as sent (index, id, function name, argument text), else None.
    """

    __slots__ = ("output", "visible", "text", "finish_reason", "usage", "error", "done", "bad", "tool_calls")

    def __init__(self, output: bool = False, visible: bool = False, text: str = "",
                 finish_reason: str | None = None, usage: dict[str, Any] | None = None,
                 error: str | None = None, done: bool = False, bad: str | None = None,
                 tool_calls: list[Any] | None = None) -> None:
        self.output = output
        self.visible = visible
        self.text = text
        self.finish_reason = finish_reason
        self.usage = usage
        self.error = error
        self.done = done
        self.bad = bad
        self.tool_calls = tool_calls

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={getattr(self, k)!r}" for k in self.__slots__ if getattr(self, k))
        return f"Chunk({fields})"


PLAIN = Chunk(output=True, visible=True)  # a content delta whose text nobody asked for
DONE = Chunk(done=True)
IGNORED = Chunk()

# Byte patterns of the plain-content fast path (shared with the transport's inlined copy).
FINISH_NULL = b'"finish_reason":null'
CHAT_CONTENT = b'"delta":{"content":"'
CHAT_EMPTY = b'"delta":{"content":""'
USAGE_OBJECT = b'"usage":{'
VLLM_PLAIN_END = b'"finish_reason":null}]}'
ERROR_KEY = b'"error"'
_TEXT = b'"text":"'
_TEXT_EMPTY = b'"text":""'


def classify(payload: bytes, want_text: bool = False) -> Chunk:
    """Turn one event's data into a :class:`Chunk`. ``want_text`` forces a parse so the
    returned chunk carries the text (multi-turn sessions replay the real replies)."""
    if not want_text and payload.endswith(VLLM_PLAIN_END):
        # vLLM/SGLang shape: the choices array closes the object, so no usage or error follows;
        # look at the delta from the end instead of scanning the whole event.
        j = payload.rfind(CHAT_CONTENT)
        if j >= 0 and payload[j + len(CHAT_CONTENT):j + len(CHAT_CONTENT) + 1] not in (b'"', b""):
            return PLAIN
    elif (not want_text and payload[-1:] == b"}" and FINISH_NULL in payload and USAGE_OBJECT not in payload
            and ERROR_KEY not in payload):
        # Escaped quotes inside the text never match these keys, so a match is structural.
        if CHAT_CONTENT in payload:
            if CHAT_EMPTY not in payload:
                return PLAIN
        elif _TEXT in payload and _TEXT_EMPTY not in payload and b'"delta"' not in payload:
            return PLAIN
    if payload == b"[DONE]":
        return DONE
    try:
        obj = json.loads(payload)
    except (ValueError, UnicodeDecodeError) as e:
        return Chunk(bad=f"invalid JSON in SSE data: {e.__class__.__name__}: {e}"[:200])
    if not isinstance(obj, dict):
        return Chunk(bad="SSE data is not a JSON object")
    return interpret(obj)


def interpret(obj: dict[str, Any]) -> Chunk:
    """Interpret one parsed chunk object (also used by the openai-SDK transport)."""
    err = obj.get("error")
    if err or obj.get("object") == "error":
        if isinstance(err, dict):
            msg = err.get("message") or json.dumps(err)
        elif err:
            msg = str(err)
        else:
            msg = str(obj.get("message") or "error object in stream")
        return Chunk(error=msg[:500])
    output = visible = False
    texts: list[str] = []
    tool_calls: list[Any] | None = None
    finish = None
    choices = obj.get("choices") or ()
    for ch in choices:
        if not isinstance(ch, dict):
            continue
        delta = ch.get("delta")
        if isinstance(delta, dict):
            content = delta.get("content")
            if content:
                output = visible = True
                texts.append(content if isinstance(content, str) else str(content))
            calls = delta.get("tool_calls")
            if calls:
                output = True
                if isinstance(calls, list):
                    tool_calls = calls if tool_calls is None else tool_calls + calls
            if delta.get("reasoning_content") or delta.get("reasoning"):
                output = True
            if delta.get("function_call"):
                output = True
        text = ch.get("text")
        if text:
            output = visible = True
            texts.append(text)
        if ch.get("finish_reason"):
            finish = str(ch["finish_reason"])
    usage = obj.get("usage")
    return Chunk(
        output=output,
        visible=visible,
        text="".join(texts),
        finish_reason=finish,
        usage=usage if isinstance(usage, dict) else None,
        tool_calls=tool_calls,
    )


class SSEDecoder:
    """Incremental Server-Sent Events decoder (WHATWG rules that LLM servers use).

    ``feed`` returns, per complete event, its data as bytes (multi-line ``data:`` joined with
    ``\\n``), or ``(event_name, data)`` for events with an ``event:`` field other than
    ``message``. Comments (``:``), ``id:`` and ``retry:`` are skipped; CRLF and LF both work.
    """

    __slots__ = ("_tail", "_data", "_event")

    def __init__(self) -> None:
        self._tail = b""
        self._data: list[bytes] | None = None
        self._event: str | None = None

    def feed(self, data: bytes) -> list[bytes | tuple[str, bytes]]:
        if self._tail:
            data = self._tail + data
        elif self._data is None and data[:6] == b"data: " and data.find(b"\n") == len(data) - 2 \
                and data[-2:] == b"\n\n":
            return [data[6:-2]]  # the usual read: exactly one single-line event
        lines = data.split(b"\n")
        self._tail = lines.pop()
        out: list[bytes | tuple[str, bytes]] = []
        for line in lines:
            if line[-1:] == b"\r":
                line = line[:-1]
            if not line:
                if self._data is not None:
                    payload = self._data[0] if len(self._data) == 1 else b"\n".join(self._data)
                    out.append(payload if self._event is None else (self._event, payload))
                self._data = None
                self._event = None
            elif line[:5] == b"data:":
                value = line[6:] if line[5:6] == b" " else line[5:]
                if self._data is None:
                    self._data = [value]
                else:
                    self._data.append(value)
            elif line[:6] == b"event:":
                name = line[6:].strip().decode("utf-8", "replace")
                self._event = None if name in ("", "message") else name
            # ":" comments, "id:", "retry:" and unknown fields carry nothing we use
        return out

    def flush(self) -> list[bytes | tuple[str, bytes]]:
        """Events left when the stream ends without a final blank line."""
        out = self.feed(b"\n\n") if (self._tail or self._data is not None) else []
        return out

    @property
    def pending(self) -> bool:
        return bool(self._tail) or self._data is not None


def classify_event(event: bytes | tuple[str, bytes], want_text: bool = False) -> Chunk:
    """``classify`` for whatever :meth:`SSEDecoder.feed` returned."""
    if type(event) is bytes:
        return classify(event, want_text)
    name, payload = event
    if name == "error":
        try:
            obj = json.loads(payload)
        except ValueError:
            return Chunk(error=payload.decode("utf-8", "replace")[:500])
        chunk = interpret(obj) if isinstance(obj, dict) else Chunk()
        return chunk if chunk.error else Chunk(error=payload.decode("utf-8", "replace")[:500])
    return IGNORED  # pings and other named events


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
