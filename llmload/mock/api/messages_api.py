"""The Anthropic Messages API (``POST /v1/messages``) as the mock speaks it, shaped like Anthropic's
and llama.cpp's streams: ``message_start`` (the prompt's usage: input tokens and cache reads),
a ``thinking`` block when the request asks for extended thinking, a ``text`` block (one
``text_delta`` per token) or a ``tool_use`` block (``input_json_delta`` pieces), then
``message_delta`` (stop reason, output tokens) and ``message_stop``. No ``[DONE]``. Pure: no I/O.

The engine's cost is the chat one: the prompt's words, then one token per emission; thinking
tokens are output tokens (Anthropic counts them in ``output_tokens``): the first ``thinking``
emissions of the reply stream as thinking, at most ``budget_tokens`` and half the reply.

Usage::

    req = parse_messages_body(body_bytes, "mock")
    fmt = MessagesFormatter("req-1", req.model, prompt=len(req.prompt_words))
    sse = fmt.role() + fmt.token(" hi", "stop") + fmt.usage(prompt=5, completion=1, cached=0)
"""

from __future__ import annotations

import json
from typing import Any

from llmload.mock.api.handler import StreamApi
from llmload.mock.api.openai_api import BadRequest, ParsedRequest, _int_field, _priority_field, _words_of, json_object

# Chat finish reasons → Anthropic's stop reasons
STOP_REASONS = {"stop": "end_turn", "length": "max_tokens", "tool_calls": "tool_use"}


def _block_words(content: object, where: str, images: list[int]) -> list[str]:
    """A message's words: text blocks, tool_use inputs and tool_result contents (Anthropic's shapes)."""
    if not isinstance(content, list):
        return _words_of(content, where, images)
    out: list[str] = []
    for i, block in enumerate(content):
        if not isinstance(block, dict):
            continue
        if block.get("type") == "tool_use":
            out += str(block.get("name", "")).split() + json.dumps(block.get("input", {})).split()
        elif block.get("type") == "tool_result":
            out += _block_words(block.get("content"), f"{where}[{i}].content", images)
        else:
            out += _words_of([block], f"{where}[{i}]", images)
    return out


def _openai_tools(tools: object) -> list[dict[str, Any]]:
    """Anthropic's tools ({name, description, input_schema}) in the chat shape the reply planner reads."""
    if not isinstance(tools, list):
        raise BadRequest("tools: expected a list of tool definitions")
    return [{"type": "function", "function": {"name": t.get("name"), "description": t.get("description", ""),
                                              "parameters": t.get("input_schema")}}
            for t in tools if isinstance(t, dict)]


def _openai_tool_choice(choice: object) -> Any:
    if not isinstance(choice, dict):
        return None
    kind = choice.get("type")
    if kind == "tool":
        return {"type": "function", "function": {"name": choice.get("name")}}
    return {"any": "required", "none": "none"}.get(str(kind), "auto")


def parse_messages_body(body_bytes: bytes, default_model: str) -> ParsedRequest:
    body = json_object(body_bytes)
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages:
        raise BadRequest("messages: expected a non-empty list")
    images: list[int] = []
    tools = _openai_tools(body.get("tools") or [])
    words = [w for t in body.get("tools") or [] for w in json.dumps(t).split()]
    words += _block_words(body.get("system"), "system", images)
    for i, m in enumerate(messages):
        if not isinstance(m, dict):
            raise BadRequest(f"messages[{i}]: expected an object")
        words += _block_words(m.get("content"), f"messages[{i}].content", images)
    thinking = body.get("thinking")
    budget = 0
    if isinstance(thinking, dict) and thinking.get("type") == "enabled":
        budget = _int_field(thinking, "budget_tokens") or 0
    return ParsedRequest(
        chat=True,
        model=str(body.get("model") or default_model),
        prompt_words=words,
        max_tokens=_int_field(body, "max_tokens"),
        ignore_eos=bool(body.get("ignore_eos", False)),
        min_tokens=_int_field(body, "min_tokens") or 0,
        stream=bool(body.get("stream", False)),
        include_usage=True,  # message_delta always carries the output's usage
        tools=tools,
        tool_choice=_openai_tool_choice(body.get("tool_choice")),
        image_tokens=sum(images),
        messages_api=True,
        thinking_budget=budget,
        priority=_priority_field(body),  # --scheduling priority orders the queue by it, as for chat
    )


def _usage(prompt: int, completion: int | None, cached: int) -> dict[str, Any]:
    # Anthropic's input_tokens leaves out the cache reads
    usage: dict[str, Any] = {"input_tokens": prompt - cached, "cache_creation_input_tokens": 0,
                             "cache_read_input_tokens": cached}
    usage["output_tokens"] = 0 if completion is None else completion
    return usage


class MessagesFormatter:
    """Builds the SSE bytes of one streamed message (no HTTP framing); the same methods as
    :class:`llmload.mock.api.openai_api.StreamFormatter`, so the served stream can use either.
    ``cached`` (the prompt's cache hits) is set before :meth:`role`; ``thinking`` is how many of
    the first emissions stream as thinking."""

    DONE = b""

    def __init__(self, request_id: str, model: str, prompt: int) -> None:
        self.msg_id = f"msg_{request_id}"
        self.model = model
        self.prompt = prompt
        self.cached = 0
        self.thinking = 0
        self.index = -1  # the open content block, -1 before the first
        self.kind = ""  # its type: "thinking", "text" or "tool_use"
        self.stop_reason = "end_turn"

    @staticmethod
    def _event(kind: str, **fields: Any) -> bytes:
        obj = {"type": kind, **fields}
        return f"event: {kind}\ndata: {json.dumps(obj, separators=(',', ':'))}\n\n".encode()

    def _close(self) -> bytes:
        if self.index < 0 or not self.kind:
            return b""
        out = b""
        if self.kind == "thinking":  # a thinking block ends with its signature
            out = self._event("content_block_delta", index=self.index,
                              delta={"type": "signature_delta", "signature": f"mock-{self.msg_id}"})
        self.kind = ""
        return out + self._event("content_block_stop", index=self.index)

    def _open(self, block: dict[str, Any]) -> bytes:
        out = self._close()
        self.index += 1
        self.kind = block["type"]
        return out + self._event("content_block_start", index=self.index, content_block=block)

    def role(self) -> bytes:
        return self._event("message_start", message={
            "id": self.msg_id, "type": "message", "role": "assistant", "content": [], "model": self.model,
            "stop_reason": None, "stop_sequence": None, "usage": _usage(self.prompt, None, self.cached)})

    def token(self, text: str, finish_reason: str | None = None) -> bytes:
        want = "thinking" if self.thinking > 0 else "text"
        self.thinking -= 1
        out = b""
        if self.kind != want:
            out = self._open({"type": want, want: ""})
        delta = {"type": "thinking_delta", "thinking": text} if want == "thinking" else \
            {"type": "text_delta", "text": text}
        if finish_reason is not None:
            self.stop_reason = STOP_REASONS.get(finish_reason, finish_reason)
        return out + self._event("content_block_delta", index=self.index, delta=delta)

    def tool_call(self, call_id: str, name: str | None, arguments: str, finish_reason: str | None = None) -> bytes:
        out = b""
        if name is not None:
            out = self._open({"type": "tool_use", "id": call_id.replace("chatcmpl-tool-", "toolu_"), "name": name,
                              "input": {}})
        if finish_reason is not None:
            self.stop_reason = STOP_REASONS.get(finish_reason, finish_reason)
        if arguments:
            out += self._event("content_block_delta", index=self.index,
                               delta={"type": "input_json_delta", "partial_json": arguments})
        return out

    def usage(self, prompt: int, completion: int, cached: int) -> bytes:
        return (self._close()
                + self._event("message_delta", delta={"stop_reason": self.stop_reason, "stop_sequence": None},
                              usage={"output_tokens": completion})
                + self._event("message_stop"))

    def error(self, message: str, status: int = 500) -> bytes:
        kind = "overloaded_error" if status in (503, 529) else "api_error"
        return self._event("error", error={"type": kind, "message": message})

    @staticmethod
    def malformed() -> bytes:
        return b'event: content_block_delta\ndata: {"type":"content_block_delta","index":0,"delta":{"type":"te\n\n'


def full_response(request_id: str, model: str, text: str, finish_reason: str, prompt: int, completion: int,
                  cached: int, tool_call: tuple[str, str] | None = None) -> bytes:
    """The non-streamed message; ``tool_call`` = (id, name) makes ``text`` the tool's input JSON."""
    if tool_call is not None:
        try:
            tool_input = json.loads(text)
        except ValueError:
            tool_input = {}
        content: list[dict[str, Any]] = [{"type": "tool_use", "id": tool_call[0].replace("chatcmpl-tool-", "toolu_"),
                                          "name": tool_call[1], "input": tool_input}]
    else:
        content = [{"type": "text", "text": text}]
    return json.dumps({"id": f"msg_{request_id}", "type": "message", "role": "assistant", "content": content,
                       "model": model, "stop_reason": STOP_REASONS.get(finish_reason, finish_reason),
                       "stop_sequence": None, "usage": _usage(prompt, completion, cached)}).encode()


HANDLER = StreamApi(parse=parse_messages_body, whole=lambda r: full_response(
    r.request_id, r.model, r.text, r.finish_reason, r.prompt, r.completion, r.cached, r.tool))
