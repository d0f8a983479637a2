"""The Responses API (``POST /v1/responses``) as the mock speaks it, shaped like OpenAI's and
vLLM's streams: ``response.created``, ``response.in_progress``, the output item and content part
being added, one ``response.output_text.delta`` per token, their ``.done`` events, then
``response.completed`` with usage. No ``[DONE]``. Pure: no I/O.

Usage::

    req = parse_responses_body(body_bytes, "mock")
    fmt = ResponsesFormatter("req-1", req.model, created=0)
    sse = fmt.role() + fmt.token(" hi") + fmt.usage(prompt=5, completion=1, cached=0)
"""

from __future__ import annotations

import json
from typing import Any

from llmload.mock.api.handler import StreamApi
from llmload.mock.api.openai_api import BadRequest, ParsedRequest, _int_field, _priority_field, _words_of, json_object


def parse_responses_body(body_bytes: bytes, default_model: str) -> ParsedRequest:
    body = json_object(body_bytes)
    given = body.get("input")
    words: list[str] = []
    images: list[int] = []
    if isinstance(given, str):
        words = given.split()
    elif isinstance(given, list) and given:
        for i, m in enumerate(given):
            if not isinstance(m, dict):
                raise BadRequest(f"input[{i}]: expected an object")
            words += _words_of(m.get("content"), f"input[{i}].content", images)
    else:
        raise BadRequest("input: expected a string or a non-empty list of messages")
    if isinstance(body.get("instructions"), str):
        words = body["instructions"].split() + words
    return ParsedRequest(
        chat=True,
        model=str(body.get("model") or default_model),
        prompt_words=words,
        max_tokens=_int_field(body, "max_output_tokens"),
        ignore_eos=bool(body.get("ignore_eos", False)),
        min_tokens=_int_field(body, "min_tokens") or 0,
        stream=bool(body.get("stream", False)),
        include_usage=True,  # the completed event always carries usage
        responses=True,
        image_tokens=sum(images),
        priority=_priority_field(body),  # --scheduling priority orders the queue by it, as for chat
    )


def _usage(prompt: int, completion: int, cached: int) -> dict[str, Any]:
    return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": cached},
            "output_tokens": completion, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion}


class ResponsesFormatter:
    """Builds the SSE bytes of one streamed response (no HTTP framing); the same methods as
    :class:`llmload.mock.api.openai_api.StreamFormatter`, so the served stream can use either."""

    DONE = b""

    def __init__(self, request_id: str, model: str, created: int) -> None:
        self.rid = f"resp_{request_id}"
        self.item = f"msg_{request_id}"
        self.model = model
        self.created = created
        self.seq = 0
        self.text: list[str] = []

    def _event(self, kind: str, **fields: Any) -> bytes:
        obj = {"type": kind, "sequence_number": self.seq, **fields}
        self.seq += 1
        return f"event: {kind}\ndata: {json.dumps(obj, separators=(',', ':'))}\n\n".encode()

    def _response(self, status: str, usage: dict[str, Any] | None = None) -> dict[str, Any]:
        output = [] if status == "in_progress" else [self._item("completed")]
        return {"id": self.rid, "object": "response", "created_at": self.created, "status": status,
                "model": self.model, "output": output, "usage": usage}

    def _item(self, status: str) -> dict[str, Any]:
        content = [] if status == "in_progress" else [{"type": "output_text", "annotations": [],
                                                        "text": "".join(self.text)}]
        return {"id": self.item, "type": "message", "status": status, "role": "assistant", "content": content}

    def role(self) -> bytes:
        return (self._event("response.created", response=self._response("in_progress"))
                + self._event("response.in_progress", response=self._response("in_progress"))
                + self._event("response.output_item.added", output_index=0, item=self._item("in_progress"))
                + self._event("response.content_part.added", item_id=self.item, output_index=0, content_index=0,
                              part={"type": "output_text", "annotations": [], "text": ""}))

    def token(self, text: str, finish_reason: str | None = None) -> bytes:
        self.text.append(text)
        return self._event("response.output_text.delta", item_id=self.item, output_index=0, content_index=0,
                           delta=text)

    def usage(self, prompt: int, completion: int, cached: int) -> bytes:
        text = "".join(self.text)
        return (self._event("response.output_text.done", item_id=self.item, output_index=0, content_index=0,
                            text=text)
                + self._event("response.content_part.done", item_id=self.item, output_index=0, content_index=0,
                              part={"type": "output_text", "annotations": [], "text": text})
                + self._event("response.output_item.done", output_index=0, item=self._item("completed"))
                + self._event("response.completed", response=self._response(
                    "completed", _usage(prompt, completion, cached))))

    def error(self, message: str, status: int = 500) -> bytes:
        return self._event("error", code="server_error", message=message, param=None)

    @staticmethod
    def malformed() -> bytes:
        return b'event: response.output_text.delta\ndata: {"type":"response.output_text.delta","delta":"x"\n\n'


def full_response(request_id: str, model: str, created: int, text: str, prompt: int, completion: int,
                  cached: int) -> bytes:
    """The non-streamed answer."""
    fmt = ResponsesFormatter(request_id, model, created)
    fmt.text = [text]
    return json.dumps(fmt._response("completed", _usage(prompt, completion, cached))).encode()


HANDLER = StreamApi(parse=parse_responses_body, whole=lambda r: full_response(
    r.request_id, r.model, r.created, r.text, r.prompt, r.completion, r.cached))
