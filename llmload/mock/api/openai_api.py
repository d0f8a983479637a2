"""The OpenAI wire format as the mock speaks it, shaped like vLLM's output. Pure: no I/O.

Prompt tokens are counted deterministically as whitespace-separated words: first the words of
each offered tool's JSON (``json.dumps`` of the definition; servers render tools into the
prompt), then every message's text (chat) or the prompt (completions), with an assistant
message's tool calls as the words of their names and arguments; template tokens are not added.
An ``image_url`` part (a base64 data URL) costs what Qwen2-VL charges for it
(:mod:`.vision`), as that many copies of a word naming the picture (a hash of its URL), so the
same picture is the same cacheable prefix. Generated tokens are words, one per chunk, each
sent as ``" word"`` (tool calls and JSON replies: :mod:`.structured`).
"""

from __future__ import annotations

import json
import math
import random
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from llmload.mock.api.handler import Reply, StreamApi
from llmload.wire.vision_tokens import ImageError, count_image_tokens

VOCAB = (
    "the of and to in is that for it as with was on be by at this are from or an have not they "
    "which one you were all we her she there would their will when can more if no out so said what "
    "up its about into than them only other new some could time these two may then first any like "
    "now my such over also after did many most made where much your well way down should because "
    "each just those people how too little state good very make world still own see men work long"
).split()


class BadRequest(ValueError):
    """A request the server rejects with 400, message in vLLM's words where it has them."""


@dataclass(frozen=True)
class ParsedRequest:
    chat: bool
    model: str
    prompt_words: list[str]
    max_tokens: int | None
    ignore_eos: bool
    min_tokens: int
    stream: bool
    include_usage: bool
    responses: bool = False  # the Responses API (its own stream shape)
    tools: list[Any] = field(default_factory=list)
    tool_choice: Any = None
    response_format: Any = None
    image_tokens: int = 0
    messages_api: bool = False  # the Anthropic Messages API (its own stream shape)
    thinking_budget: int = 0  # Messages: thinking.budget_tokens when extended thinking is on
    priority: int = 0  # vLLM's body priority (lower first); read by --scheduling priority, else ignored


def _words_of(content: object, where: str, images: list[int]) -> list[str]:
    """A message content's words; each image part adds its tokens (counted into ``images``)."""
    if isinstance(content, str):
        return content.split()
    if content is None:
        return []
    if isinstance(content, list):  # [{"type": "text", "text": ...}, {"type": "image_url", ...}, ...]
        out: list[str] = []
        for i, part in enumerate(content):
            if not isinstance(part, dict):
                continue
            if isinstance(part.get("text"), str):
                out += part["text"].split()
            elif part.get("type") == "image_url":
                inner = part.get("image_url")
                url = inner.get("url") if isinstance(inner, dict) else inner
                if not isinstance(url, str):
                    raise BadRequest(f"{where}[{i}].image_url: expected {{url: 'data:image/...;base64,...'}}")
                try:
                    n = count_image_tokens(url)
                except ImageError as e:
                    raise BadRequest(f"{where}[{i}].image_url: {e}") from None
                images.append(n)
                out += [f"<image:{zlib.crc32(url.encode()):08x}>"] * n
        return out
    raise BadRequest(f"{where}: expected a string or a list of content parts")


def _tool_call_words(calls: object, where: str) -> list[str]:
    if not isinstance(calls, list):
        raise BadRequest(f"{where}: expected a list of tool calls")
    out: list[str] = []
    for call in calls:
        fn = call.get("function") if isinstance(call, dict) else None
        if isinstance(fn, dict):
            out += str(fn.get("name", "")).split() + str(fn.get("arguments", "")).split()
    return out


def _int_field(body: dict, key: str) -> int | None:
    value = body.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise BadRequest(f"{key}: expected a non-negative integer, got {value!r}")
    return value


def json_object(body_bytes: bytes) -> dict[str, Any]:
    """A request body that must be one JSON object; BadRequest (a 400) otherwise."""
    try:
        body = json.loads(body_bytes)
    except (ValueError, UnicodeDecodeError) as e:
        raise BadRequest(f"request body is not valid JSON: {e}") from None
    if not isinstance(body, dict):
        raise BadRequest("request body: expected a JSON object")
    return body


def parse_body(body_bytes: bytes, chat: bool, default_model: str) -> ParsedRequest:
    body = json_object(body_bytes)
    images: list[int] = []
    tools = body.get("tools") or []
    if not isinstance(tools, list):
        raise BadRequest("tools: expected a list of tool definitions")
    if chat:
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages:
            raise BadRequest("messages: expected a non-empty list")
        words = [w for t in tools for w in json.dumps(t).split()]
        for i, m in enumerate(messages):
            if not isinstance(m, dict):
                raise BadRequest(f"messages[{i}]: expected an object")
            words += _words_of(m.get("content"), f"messages[{i}].content", images)
            if m.get("tool_calls"):
                words += _tool_call_words(m["tool_calls"], f"messages[{i}].tool_calls")
    else:
        prompt = body.get("prompt")
        if isinstance(prompt, list):
            prompt = " ".join(str(p) for p in prompt)
        if not isinstance(prompt, str):
            raise BadRequest("prompt: expected a string")
        words = prompt.split()
    max_tokens = _int_field(body, "max_completion_tokens")
    if max_tokens is None:
        max_tokens = _int_field(body, "max_tokens")
    stream_options = body.get("stream_options") or {}
    return ParsedRequest(
        chat=chat,
        model=str(body.get("model") or default_model),
        prompt_words=words,
        max_tokens=max_tokens,
        ignore_eos=bool(body.get("ignore_eos", False)),
        min_tokens=_int_field(body, "min_tokens") or 0,
        stream=bool(body.get("stream", False)),
        include_usage=bool(isinstance(stream_options, dict) and stream_options.get("include_usage")),
        tools=tools if chat else [],
        tool_choice=body.get("tool_choice"),
        response_format=body.get("response_format"),
        image_tokens=sum(images),
        priority=_priority_field(body),
    )


def _priority_field(body: dict) -> int:
    """vLLM's ``priority``: any whole number, 0 when absent. (vLLM answers 400 to a non-zero one unless it
    runs --scheduling-policy priority; the mock takes it under either policy, so one scenario runs against both.)"""
    value = body.get("priority", 0)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequest(f"priority: expected an integer, got {value!r}")
    return value


def choose_output_tokens(req: ParsedRequest, max_model_len: int, median_tokens: int, rng: random.Random) -> int:
    """`max_tokens` with ignore_eos; otherwise a lognormal draw capped by max_tokens."""
    room = max_model_len - len(req.prompt_words)
    if req.max_tokens is not None and req.max_tokens > room:
        raise BadRequest(
            f"This model's maximum context length is {max_model_len} tokens. However, you requested "
            f"{len(req.prompt_words) + req.max_tokens} tokens ({len(req.prompt_words)} in the messages, "
            f"{req.max_tokens} in the completion). Please reduce the length of the messages or completion."
        )
    if room <= 0:
        raise BadRequest(
            f"This model's maximum context length is {max_model_len} tokens. However, your messages "
            f"resulted in {len(req.prompt_words)} tokens. Please reduce the length of the messages."
        )
    cap = req.max_tokens if req.max_tokens is not None else room
    if req.ignore_eos:
        return cap
    drawn = int(round(rng.lognormvariate(math.log(max(median_tokens, 1)), 0.6)))
    return max(min(cap, max(drawn, req.min_tokens, 1)), 0)


def error_body(status: int, message: str) -> bytes:
    kinds = {400: "BadRequestError", 404: "NotFoundError", 429: "RateLimitError",
             500: "InternalServerError", 503: "ServiceUnavailableError"}
    return json.dumps(
        {"error": {"message": message, "type": kinds.get(status, "APIError"), "param": None, "code": status}}
    ).encode()


class StreamFormatter:
    """Builds the SSE bytes of one streamed response (no HTTP framing)."""

    def __init__(self, chat: bool, request_id: str, model: str, created: int) -> None:
        self.chat = chat
        if chat:
            self._head = (
                f'data: {{"id":"chatcmpl-{request_id}","object":"chat.completion.chunk","created":{created},'
                f'"model":{json.dumps(model)},"choices":[{{"index":0,"delta":{{'
            ).encode()
        else:
            self._head = (
                f'data: {{"id":"cmpl-{request_id}","object":"text_completion","created":{created},'
                f'"model":{json.dumps(model)},"choices":[{{"index":0,'
            ).encode()
        self._usage_head = self._head.split(b'"choices"')[0]

    def role(self) -> bytes:
        if not self.chat:
            return b""
        return (self._head + b'"role":"assistant","content":""},"logprobs":null,"finish_reason":null}],'
                b'"prompt_token_ids":null,"prompt_text":null}\n\n')

    def token(self, text: str, finish_reason: str | None = None) -> bytes:
        # The fields and order of vLLM >= 0.10.2 chunks (token_ids, kv_transfer_params), so a client
        # is measured on the bytes today's vLLM sends (tests/fixtures/streams/vllm_chat_usage.http).
        t = json.dumps(text).encode()
        finish = b'null' if finish_reason is None else b'"' + finish_reason.encode() + b'","stop_reason":null'
        if self.chat:
            return (self._head + b'"content":' + t + b'},"logprobs":null,"finish_reason":' + finish
                    + b',"token_ids":null}],"kv_transfer_params":null}\n\n')
        ids = b',"stop_reason":null,"prompt_token_ids":null' if finish_reason is None else b""
        return (self._head + b'"text":' + t + b',"logprobs":null,"finish_reason":' + finish + ids
                + b',"token_ids":null}],"kv_transfer_params":null}\n\n')

    def tool_call(self, call_id: str, name: str | None, arguments: str, finish_reason: str | None = None) -> bytes:
        """A ``delta.tool_calls`` chunk as vLLM streams it: the first with ``id``, ``type`` and the
        function ``name`` (``name`` given), the others with an ``arguments`` piece."""
        if name is not None:
            call: dict[str, Any] = {"id": call_id, "type": "function", "index": 0, "function": {"name": name}}
            if arguments:
                call["function"]["arguments"] = arguments
        else:
            call = {"index": 0, "function": {"arguments": arguments}}
        finish = b"null" if finish_reason is None else b'"' + finish_reason.encode() + b'"'
        return (self._head + b'"tool_calls":[' + json.dumps(call, separators=(",", ":")).encode()
                + b']},"logprobs":null,"finish_reason":' + finish + b"}]}\n\n")

    def usage(self, prompt: int, completion: int, cached: int) -> bytes:
        usage = {"prompt_tokens": prompt, "total_tokens": prompt + completion, "completion_tokens": completion,
                 "prompt_tokens_details": {"cached_tokens": cached}}
        body = json.dumps(usage, separators=(",", ":")).encode()
        return self._usage_head + b'"choices":[],"usage":' + body + b"}\n\n"

    @staticmethod
    def error(message: str, status: int = 500) -> bytes:
        err = {"error": {"message": message, "type": "InternalServerError", "param": None, "code": status}}
        return b"data: " + json.dumps(err).encode() + b"\n\n"

    @staticmethod
    def malformed() -> bytes:
        return b'data: {"id":"broken","choices":[{"delta":{"content":"x"\n\n'

    DONE = b"data: [DONE]\n\n"


def full_response(chat: bool, request_id: str, model: str, created: int, text: str, finish_reason: str,
                  prompt: int, completion: int, cached: int, tool_call: tuple[str, str] | None = None) -> bytes:
    """A non-streamed reply; ``tool_call`` = (id, name) makes ``text`` the call's arguments."""
    usage = {"prompt_tokens": prompt, "total_tokens": prompt + completion, "completion_tokens": completion,
             "prompt_tokens_details": {"cached_tokens": cached}}
    if chat:
        message: dict[str, Any] = {"role": "assistant", "content": text}
        if tool_call is not None:
            message = {"role": "assistant", "content": None, "tool_calls": [
                {"id": tool_call[0], "type": "function", "function": {"name": tool_call[1], "arguments": text}}]}
        body = {"id": f"chatcmpl-{request_id}", "object": "chat.completion", "created": created, "model": model,
                "choices": [{"index": 0, "message": message,
                             "logprobs": None, "finish_reason": finish_reason}], "usage": usage}
    else:
        body = {"id": f"cmpl-{request_id}", "object": "text_completion", "created": created, "model": model,
                "choices": [{"index": 0, "text": text, "logprobs": None, "finish_reason": finish_reason}],
                "usage": usage}
    return json.dumps(body).encode()


def token_text(seq_seed: int, index: int) -> str:
    return " " + VOCAB[(seq_seed * 31 + index * 7) % len(VOCAB)]


def _openai_whole(chat: bool) -> Callable[[Reply], bytes]:
    def whole(r: Reply) -> bytes:
        return full_response(chat, r.request_id, r.model, r.created, r.text, r.finish_reason, r.prompt, r.completion,
                             r.cached, r.tool)

    return whole


CHAT = StreamApi(parse=lambda body, model: parse_body(body, True, model), whole=_openai_whole(True))
COMPLETIONS = StreamApi(parse=lambda body, model: parse_body(body, False, model), whole=_openai_whole(False))
