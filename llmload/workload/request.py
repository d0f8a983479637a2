"""The request a workload hands to a user, and the interface every workload implements."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol

from llmload.wire.endpoints import endpoint as endpoint_of
from llmload.wire.endpoints import part
from llmload.wire.protocol import completions_body, encode_body


@dataclass(slots=True)
class LLMRequest:
    """One request to send: the body fields plus what to record about it."""

    scenario: str
    max_tokens: int | None
    messages: list[dict[str, Any]] | None = None  # chat
    prompt: str | None = None  # completions
    model: str = ""
    sampling: dict[str, Any] = field(default_factory=dict)
    extra: dict[str, Any] = field(default_factory=dict)  # server-specific (ignore_eos, min_tokens)
    session_id: str = ""
    turn: int | None = None
    want_text: bool = False  # keep the reply's text (multi-turn history)
    input_tokens: int | None = None  # what the workload asked for, to compare with prompt_tokens
    resent_tokens: int | None = None  # of those, the words it sent before by design (history, context, system)
    wait_s: float = 0.0  # think time before sending (turns after the first of a session)
    step_kind: str = ""  # agent tasks: "task" (the first call) or "tool_result" (a call after tool results)
    image_tokens: int | None = None  # what the prompt's images cost a Qwen2-VL-style model
    call_id: str = ""  # call-graph sessions: this call's id in the session's graph
    call_after: str = ""  # and the ids of the calls it waited for, joined by "+"
    headers: dict[str, str] | None = None  # per-request headers (a session's affinity header)
    prefix_id: str = ""  # the shared prefix it carries (workload.group+index), for --affinity-headers

    def body(self, endpoint: str = "chat") -> dict[str, Any]:
        """The JSON body for ``endpoint`` (a streaming one: its builder in :mod:`llmload.wire.endpoints`).
        A request without messages is a plain prompt; one with messages goes as chat to an endpoint
        that takes a prompt."""
        if self.messages is None:
            return completions_body(self.model, self.prompt or "", self.max_tokens, sampling=self.sampling,
                                    extra=self.extra)
        ep = endpoint_of(endpoint)
        build = part(ep.body if ep.takes == "messages" else endpoint_of("chat").body)
        return build(self.model, self.messages, self.max_tokens, sampling=self.sampling, extra=self.extra)

    def encode(self, endpoint: str = "chat") -> bytes:
        """The JSON body to send (pictures' data URLs spliced in as bytes: see images.encode_with_images)."""
        if self.image_tokens:
            from llmload.workload.images import encode_with_images  # numpy: only for image workloads

            return encode_with_images(self.body(endpoint))
        return encode_body(self.body(endpoint))


class Workload(Protocol):
    """Gives each user its next request; ``on_reply`` lets sessions carry real replies."""

    def next_request(self) -> LLMRequest: ...

    def on_reply(self, request: LLMRequest, text: str, ok: bool) -> None: ...
