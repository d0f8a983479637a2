"""Every endpoint llmload sends to and the mock serves, declared once: its name, path, how it answers,
how its body is built and its answer read, what its rows carry, its span's operation, the mock's
handler and its metrics. The code that differs by endpoint looks it up here or iterates
:data:`ENDPOINTS`; none types an endpoint's name. Pure.

A part that lives outside ``wire`` is named ``"module:attribute"`` and imported when first used
(:func:`part`), so the mock's handler is named here without the client importing the mock, and a
workload without the workload package being loaded by the mock. A stream's events are read by
:func:`llmload.wire.chunks.classify_event` for every streaming endpoint (it tells the shapes apart
by their own fields); what a stream needs besides is declared here (``end_event``).

How to add an endpoint: its wire part (the body and the answer's check), its workload and the mock's
handler, each a module of its own, and one :class:`Endpoint` in :data:`ENDPOINTS`
(docs/architecture.md#how-to-add-an-endpoint).

Usage::

    ep = endpoint("embeddings")            # KeyError names the known endpoints
    ep.path, ep.answer, ep.operation       # "/v1/embeddings", "body", "embeddings"
    names(STREAM)                          # ("chat", "completions", "responses", "messages")
    check = part(ep.check)                 # llmload.wire.embeddings.check_embeddings
    by_path("/v1/messages").end_event      # "message_stop"
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from typing import Any

STREAM = "stream"  # answered in Server-Sent Events (or one whole body when the request asks for no stream)
BODY = "body"  # answered with one whole JSON body, held to its request by ``check``
UPLOAD = "upload"  # a multipart upload (audio), streamed or whole: a user class of its own
ANSWERS = (STREAM, BODY, UPLOAD)


@dataclass(frozen=True)
class Key:
    """A scenario key of a whole-body workload (``endpoint: NAME``), with how it is read:
    ``tokens`` (a length distribution), ``texts`` (texts per request, each built ahead: bounded),
    ``choice`` (one of ``choices``) or ``whole`` (a whole number)."""

    kind: str
    default: Any = None
    choices: tuple[str, ...] = ()


@dataclass(frozen=True)
class Endpoint:
    name: str
    """What ``--endpoint``, a scenario's ``endpoint:`` and a user class's ``endpoint`` call it."""
    path: str
    answer: str
    """:data:`STREAM`, :data:`BODY` or :data:`UPLOAD`."""
    description: str
    operation: str
    """Its spans' ``gen_ai.operation.name`` (the GenAI conventions' value, else its own name)."""
    provider: str = "openai"
    """Its spans' ``gen_ai.provider.name``: the API's owner."""
    takes: str = ""
    """A stream's request form: ``messages`` or ``prompt``."""
    body: str = ""
    """A stream's body builder, ``(model, messages or prompt, max_tokens, *, sampling, extra) -> dict``."""
    check: str = ""
    """A whole body's check, ``(answer, *request.check) -> .error, .prompt_tokens``."""
    workload: str = ""
    """A whole-body scenario workload's maker, ``(spec, model, context) -> .next_request()``."""
    mock: str = ""
    """The mock's handler of its path (:mod:`llmload.mock.api.handler`)."""
    keys: Mapping[str, Key] = field(default_factory=dict)
    """A whole-body workload's scenario keys, besides weight, endpoint, model, slo and headers."""
    row_fields: tuple[str, ...] = ()
    """The ``PREFIX_requests.csv`` columns only its rows fill (what it sent)."""
    metrics: tuple[str, ...] = ()
    """What its rows measure, by their names in :mod:`llmload.metrics.catalog`."""
    faults: tuple[str, ...] = ()
    """The mock's faults (``X-Mock-Fault``, ``--fault``) only this endpoint knows."""
    end_event: str | None = None
    """The event a stream must end with to be whole (None: a finish reason is enough)."""
    auth: str = "bearer"
    """``bearer`` (Authorization: Bearer) or ``anthropic`` (x-api-key and anthropic-version)."""


_STREAMED = ("ttft", "ttft_visible", "tpot", "itl", "itl_max", "e2e")  # the latency metrics of a token stream
_RANK_KEYS = {"documents": Key("texts", 16), "query_tokens": Key("tokens", 16), "document_tokens": Key("tokens", 128)}

ENDPOINTS: tuple[Endpoint, ...] = (
    Endpoint("chat", "/v1/chat/completions", STREAM, "OpenAI chat completions: messages in, a token stream out",
             "chat", takes="messages", body="llmload.wire.protocol:chat_body",
             mock="llmload.mock.api.openai_api:CHAT", metrics=_STREAMED),
    Endpoint("completions", "/v1/completions", STREAM, "OpenAI completions: a prompt in, a token stream out",
             "text_completion", takes="prompt", body="llmload.wire.protocol:completions_body",
             mock="llmload.mock.api.openai_api:COMPLETIONS", metrics=_STREAMED),
    Endpoint("responses", "/v1/responses", STREAM, "OpenAI's Responses API: messages as input, typed stream events",
             "chat", takes="messages", body="llmload.wire.protocol:responses_body",
             mock="llmload.mock.api.responses_api:HANDLER", metrics=_STREAMED),
    Endpoint("messages", "/v1/messages", STREAM, "Anthropic's Messages API: messages in, its stream events out",
             "chat", provider="anthropic", takes="messages", body="llmload.wire.protocol:messages_body",
             mock="llmload.mock.api.messages_api:HANDLER", metrics=_STREAMED, end_event="message_stop",
             auth="anthropic"),
    Endpoint("embeddings", "/v1/embeddings", BODY, "a batch of texts in, one vector each out", "embeddings",
             check="llmload.wire.embeddings:check_embeddings",
             workload="llmload.workload.endpoints.embeddings:from_spec",
             mock="llmload.mock.front.body_endpoints:EMBEDDINGS",
             keys={"batch_size": Key("texts", 8), "input_tokens": Key("tokens", 128),
                   "encoding_format": Key("choice", "float", ("float", "base64")), "dimensions": Key("whole")},
             row_fields=("inputs",), metrics=("e2e", "inputs_per_s", "input_tps"), faults=("missing_vector",)),
    Endpoint("rerank", "/v1/rerank", BODY, "a query and passages in, the passages ranked out (Cohere/Jina shape)",
             "rerank", check="llmload.wire.rerank:check_rerank",
             workload="llmload.workload.endpoints.rerank:from_spec",
             mock="llmload.mock.front.body_endpoints:RANK", keys={**_RANK_KEYS, "top_n": Key("whole")},
             row_fields=("inputs",), metrics=("e2e", "inputs_per_s", "input_tps"), faults=("wrong_index",)),
    Endpoint("score", "/v1/score", BODY, "vLLM's score: a query and passages in, one score each out", "score",
             check="llmload.wire.rerank:check_score", workload="llmload.workload.endpoints.rerank:from_spec",
             mock="llmload.mock.front.body_endpoints:RANK", keys=_RANK_KEYS, row_fields=("inputs",),
             metrics=("e2e", "inputs_per_s", "input_tps")),
    Endpoint("audio", "/v1/audio/transcriptions", UPLOAD, "an audio clip uploaded, its transcript streamed or whole",
             "audio", check="llmload.wire.audio:check_transcription",
             mock="llmload.mock.front.audio_serve:HANDLER", row_fields=("audio_seconds",),
             metrics=("ttft", "e2e", "rtfx", "request_rtfx"), faults=("missing_text", "no_final_chunk")),
    Endpoint("tokenize", "/tokenize", BODY, "a text in, its token ids out (vLLM's or llama.cpp's shape): the "
             "tokenizer's cost", "tokenize", check="llmload.wire.tokenize:check_tokenize",
             workload="llmload.workload.endpoints.tokenize:from_spec", mock="llmload.mock.api.tokenize_api:HANDLER",
             keys={"input_tokens": Key("tokens", 128), "tokenize_format": Key("choice", "vllm", ("vllm", "llamacpp"))},
             row_fields=("inputs",), metrics=("e2e", "inputs_per_s", "input_tps"), faults=("wrong_count",)),
)


def names(*answers: str) -> tuple[str, ...]:
    """The endpoints' names, in declaration order; with ``answers``, those that answer so."""
    return tuple(e.name for e in ENDPOINTS if not answers or e.answer in answers)


@cache
def _by_name() -> dict[str, Endpoint]:
    return {e.name: e for e in ENDPOINTS}


@cache
def _by_path() -> dict[str, Endpoint]:
    return {e.path: e for e in ENDPOINTS}


def endpoint(name: str) -> Endpoint:
    """The endpoint called ``name``; KeyError naming the known ones."""
    try:
        return _by_name()[name]
    except KeyError:
        raise KeyError(f"no endpoint {name!r}: expected one of {', '.join(names())}") from None


def known(name: Any) -> bool:
    return isinstance(name, str) and name in _by_name()


def by_path(path: str) -> Endpoint | None:
    """The endpoint served at ``path`` (a query string and a trailing slash left out), or None."""
    return _by_path().get(path.split("?", 1)[0].rstrip("/") or "/")


def end_event_for(path: str) -> str | None:
    """The event a stream from ``path`` must end with to be whole: ``message_stop`` for the Messages
    API (``.../messages``, under any prefix a proxy adds); None where a finish reason is enough."""
    bare = path.split("?", 1)[0].rstrip("/")
    for e in ENDPOINTS:
        if e.end_event is not None and bare.endswith("/" + e.path.rsplit("/", 1)[-1]):
            return e.end_event
    return None


@cache
def part(ref: str) -> Any:
    """The object a ``"module:attribute"`` reference names (imported once)."""
    module, _, attr = ref.partition(":")
    return getattr(importlib.import_module(module), attr)
