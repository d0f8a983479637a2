"""What one SSE event means for the metrics: output or not, visible or not, the finish reason,
usage, an error, the end. Pure.

Chat and completions chunks (vLLM, SGLang, TGI, llama.cpp, Ollama, OpenAI, Azure, ...), the
Responses API's events (``response.output_text.delta``, ``response.reasoning_text.delta``,
``response.completed`` with usage, ...) and the Anthropic Messages API's events
(``content_block_delta`` with text, thinking or tool input JSON, ``message_delta`` with the stop
reason and usage, ``message_stop``) map onto one :class:`Chunk`.

``classify`` decides the common case, a content delta with no finish reason, from the bytes alone
(no ``json.loads``): that is most chunks of every stream, and skipping the parse saves ~17 % of the
client's CPU per token (docs/architecture.md#the-hot-path). The byte test is structural: quotes inside JSON
strings are escaped, so a key such as ``"usage":{`` can only match a key. It requires one choice
(one ``"delta"``), non-empty content, one ``"finish_reason"`` and it null, no usage object, no
``"error"`` and a closing ``}``; anything else is parsed. A broken event that still has every marker and ends in
``}`` would pass as content.

Every count taken from a server (``usage``'s prompt, completion and cached tokens, in the chat
and the Responses shapes) is checked here, where it is parsed (:func:`checked_count`): one that no
table, CSV or msgpack message can hold makes the event ``bad`` (a protocol error naming the field).

Usage::

    chunk = classify(b'{"choices":[{"delta":{"content":"Hi"},"finish_reason":null}]}')   # PLAIN
    chunk = classify_event(("response.completed", b'{"type":"response.completed",...}'))
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from llmload.wire.usage import CHAT_USAGE, UsageError, checked_count, checked_usage, responses_usage


class Chunk:
    """``output``: carries generated output (content, reasoning, tool calls, completion text);
    ``visible``: carries non-empty ``content``/``text``; ``done``: the end of the stream (``[DONE]``,
    or the Responses API's ``response.completed``/``response.incomplete``); ``bad``: the event
    could not be parsed (protocol error); ``tool_calls``: the event's ``delta.tool_calls`` pieces as
    sent (index, id, function name, argument text), else None."""

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

# Byte patterns of the plain-content test (the transport's inlined copy uses them too).
CHAT_CONTENT = b'"delta":{"content":"'
DELTA_KEY = b'"delta"'
FINISH_NULL = b'"finish_reason":null'
FINISH_KEY = b'"finish_reason"'
USAGE_OBJECT = b'"usage":{'
ERROR_KEY = b'"error"'
_CONTENT_LEN = len(CHAT_CONTENT)
_TEXT = b'"text":"'
_TEXT_EMPTY = b'"text":""'

# Responses API events that carry output, and whether that output is visible text.
RESPONSES_OUTPUT = {
    "response.output_text.delta": True,
    "response.refusal.delta": True,
    "response.reasoning_text.delta": False,
    "response.reasoning_summary_text.delta": False,
    "response.function_call_arguments.delta": False,
}
RESPONSES_END = ("response.completed", "response.incomplete")


def is_plain(p: bytes) -> bool:
    """A chat content delta (one choice, non-empty content, no finish reason, no usage, no error)."""
    j = p.find(CHAT_CONTENT)
    if j < 0:
        # completions: one choice with non-empty "text" and no delta
        return (p[-1:] == b"}" and FINISH_NULL in p and _TEXT in p and _TEXT_EMPTY not in p
                and DELTA_KEY not in p and p.count(_TEXT) == 1 and USAGE_OBJECT not in p and ERROR_KEY not in p
                and p.count(FINISH_KEY) == 1)
    # one finish_reason, the null one: a second choice that only finishes (no delta, no text) is not lost
    return (p[j + _CONTENT_LEN:j + _CONTENT_LEN + 1] not in (b'"', b"") and p.rfind(DELTA_KEY) == j
            and p[-1:] == b"}" and FINISH_NULL in p and USAGE_OBJECT not in p and ERROR_KEY not in p
            and p.count(FINISH_KEY) == 1)


def classify(payload: bytes, want_text: bool = False) -> Chunk:
    """Turn one event's data into a :class:`Chunk`. ``want_text`` forces a parse so the
    returned chunk carries the text (multi-turn sessions replay the real replies)."""
    if not want_text and is_plain(payload):
        return PLAIN
    if payload == b"[DONE]":
        return DONE
    return _json_event(payload, interpret)


def _json_event(payload: bytes, meaning: Callable[[dict[str, Any]], Chunk]) -> Chunk:
    """An event's JSON object and what ``meaning`` makes of it; a bad chunk when it is not one."""
    try:
        obj = json.loads(payload)
    except (ValueError, UnicodeDecodeError) as e:
        return Chunk(bad=f"invalid JSON in SSE data: {e.__class__.__name__}: {e}"[:200])
    if not isinstance(obj, dict):
        return Chunk(bad="SSE data is not a JSON object")
    return meaning(obj)


def _error_text(err: Any, obj: dict[str, Any]) -> str:
    if isinstance(err, dict):
        return str(err.get("message") or json.dumps(err))
    if err:
        return str(err)
    return str(obj.get("message") or "error object in stream")


def interpret(obj: dict[str, Any]) -> Chunk:
    """Interpret one parsed event object (chat, completions or the Responses API)."""
    kind = obj.get("type")
    if isinstance(kind, str) and (kind.startswith("response.") or kind == "error"):
        return interpret_response_event(obj)
    err = obj.get("error")
    if err or obj.get("object") == "error":
        return Chunk(error=_error_text(err, obj)[:500])
    output = visible = False
    texts: list[str] = []
    tool_calls: list[Any] | None = None
    finish = None
    for ch in obj.get("choices") or ():
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
            if delta.get("reasoning_content") or delta.get("reasoning") or delta.get("function_call"):
                output = True
        text = ch.get("text")
        if text:
            output = visible = True
            texts.append(text)
        if ch.get("finish_reason"):
            finish = str(ch["finish_reason"])[:100]  # a reason, not a payload: it is a CSV cell and a message field
    usage = obj.get("usage")
    if isinstance(usage, dict):
        try:
            usage = checked_usage(usage, CHAT_USAGE)
        except UsageError as e:
            return Chunk(bad=str(e))
    else:
        usage = None
    return Chunk(output=output, visible=visible, text="".join(texts), finish_reason=finish,
                 usage=usage, tool_calls=tool_calls)


def interpret_response_event(obj: dict[str, Any]) -> Chunk:
    """One Responses API event (``type`` ``response.*`` or ``error``)."""
    kind = obj.get("type")
    visible = RESPONSES_OUTPUT.get(kind)  # type: ignore[arg-type]
    if visible is not None:
        delta = obj.get("delta")
        if not delta:
            return IGNORED
        return Chunk(output=True, visible=visible, text=str(delta) if visible else "")
    if kind in RESPONSES_END:
        resp = obj.get("response") if isinstance(obj.get("response"), dict) else {}
        finish = str(resp.get("status") or kind.rsplit(".", 1)[-1])[:100]
        details = resp.get("incomplete_details")
        if kind == "response.incomplete" and isinstance(details, dict) and details.get("reason"):
            finish = str(details["reason"])[:100]
        try:
            usage = responses_usage(resp.get("usage"))
        except UsageError as e:
            return Chunk(bad=str(e))  # not the end: a bad count makes the request a protocol error
        return Chunk(done=True, finish_reason=finish, usage=usage)
    if kind == "response.failed":
        resp = obj.get("response") if isinstance(obj.get("response"), dict) else {}
        return Chunk(error=_error_text(resp.get("error"), resp or obj)[:500])
    if kind == "error":
        return Chunk(error=_error_text(obj.get("error") or obj.get("message"), obj)[:500])
    return IGNORED


def classify_event(event: bytes | tuple[str, bytes], want_text: bool = False) -> Chunk:
    """``classify`` for whatever :meth:`llmload.wire.sse.SSEDecoder.feed` returned."""
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
    if name == "content_block_delta":  # a Messages token: one of these per token, decided from bytes when plain
        if not want_text and is_plain_text_delta(payload):
            return PLAIN
        return _messages_event(payload)
    if name.startswith("response."):
        return classify(payload, want_text=True)
    if name in MESSAGES_EVENTS:
        return _messages_event(payload)
    return IGNORED  # pings and other named events


# -- the Anthropic Messages API (/v1/messages) -------------------------------------------------
# The events that mean something (ping, content_block_stop and unknown names are ignored; error is
# handled above, as for the Responses API: {"type":"error","error":{"type":...,"message":...}}).
MESSAGES_EVENTS = frozenset({"message_start", "content_block_start", "content_block_delta", "message_delta",
                             "message_stop"})
MESSAGES_END = "message_stop"  # a Messages stream without it did not end (record.StreamAccumulator.end_event)
_TEXT_DELTA = b'"delta":{"type":"text_delta","text":"'
_TEXT_DELTA_LEN = len(_TEXT_DELTA)
# Messages usage → the chat shape. Anthropic's input_tokens leaves out the cached part: the prompt is
# input + cache reads + cache writes, and the cached tokens are the cache reads.
MESSAGES_USAGE = ((("input_tokens",), "input"), (("cache_read_input_tokens",), "cache_read"),
                  (("cache_creation_input_tokens",), "cache_write"), (("output_tokens",), "output"))
_STOP_REASON_CAP = 100


def is_plain_text_delta(p: bytes) -> bool:
    """A Messages ``text_delta`` with non-empty text, decided from the bytes (quotes inside JSON strings
    are escaped, so the marker can only be the delta's own keys); anything else is parsed."""
    j = p.find(_TEXT_DELTA)
    return j > 0 and p[j + _TEXT_DELTA_LEN:j + _TEXT_DELTA_LEN + 1] not in (b'"', b"") and p[-1:] == b"}" \
        and p.rfind(DELTA_KEY) == j and ERROR_KEY not in p


def messages_usage(usage: Any, with_output: bool) -> dict[str, Any] | None:
    """A Messages usage object in the chat shape; ``with_output`` False leaves out ``output_tokens``
    (message_start's is a placeholder, 0 or 1, before anything was generated). Raises
    :class:`UsageError` for a count :func:`checked_count` refuses."""
    if not isinstance(usage, dict):
        return None
    counts: dict[str, int] = {}
    for path, name in MESSAGES_USAGE:
        count = checked_count(usage.get(path[0]), path[0])
        if count is not None:
            counts[name] = count
    out: dict[str, Any] = {}
    if "input" in counts:
        out["prompt_tokens"] = counts["input"] + counts.get("cache_read", 0) + counts.get("cache_write", 0)
        if "cache_read" in counts:
            out["prompt_tokens_details"] = {"cached_tokens": counts["cache_read"]}
    if with_output and "output" in counts:
        out["completion_tokens"] = counts["output"]
    return out or None


def _messages_event(payload: bytes) -> Chunk:
    return _json_event(payload, interpret_messages_event)


def interpret_messages_event(obj: dict[str, Any]) -> Chunk:
    """One Messages API event, by its ``type``. Output: non-empty text, thinking or tool input JSON,
    and a tool_use block's start (its name is generated, as a chat stream's first tool-call piece);
    signature deltas are not output. ``tool_calls`` pieces are in the chat shape (index, id, name,
    argument text), so :func:`llmload.wire.tool_calls.assemble` puts the calls back together."""
    kind = obj.get("type")
    try:
        if kind == "content_block_delta":
            delta = obj.get("delta") if isinstance(obj.get("delta"), dict) else {}
            dtype = delta.get("type")
            if dtype == "text_delta" and delta.get("text"):
                return Chunk(output=True, visible=True, text=str(delta["text"]))
            if dtype == "thinking_delta" and delta.get("thinking"):
                return Chunk(output=True)
            if dtype == "input_json_delta" and delta.get("partial_json"):
                return Chunk(output=True, tool_calls=[{"index": obj.get("index"),
                                                       "function": {"arguments": str(delta["partial_json"])}}])
            return IGNORED
        if kind == "content_block_start":
            block = obj.get("content_block") if isinstance(obj.get("content_block"), dict) else {}
            if block.get("type") == "tool_use":
                return Chunk(output=True, tool_calls=[{"index": obj.get("index"), "id": block.get("id"),
                                                       "type": "function",
                                                       "function": {"name": str(block.get("name") or "")}}])
            if block.get("type") == "text" and block.get("text"):
                return Chunk(output=True, visible=True, text=str(block["text"]))
            return IGNORED
        if kind == "message_start":
            message = obj.get("message") if isinstance(obj.get("message"), dict) else {}
            return Chunk(usage=messages_usage(message.get("usage"), with_output=False))
        if kind == "message_delta":
            delta = obj.get("delta") if isinstance(obj.get("delta"), dict) else {}
            stop = delta.get("stop_reason")
            return Chunk(finish_reason=str(stop)[:_STOP_REASON_CAP] if stop else None,
                         usage=messages_usage(obj.get("usage"), with_output=True))
        if kind == MESSAGES_END:
            return DONE
        if kind == "error":
            return interpret_response_event(obj)
    except UsageError as e:
        return Chunk(bad=str(e))
    return IGNORED
