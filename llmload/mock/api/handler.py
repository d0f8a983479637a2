"""What the mock's handler of an endpoint is, as :data:`llmload.wire.endpoints.ENDPOINTS` names it
(``mock``): a :class:`StreamApi` (the engine streams the reply; the server's completion path serves
it, :mod:`llmload.mock.front.completion`), a :class:`PlainApi` (the API server answers it at once,
without the engine) or a :class:`BodyApi` (a function of its own serves it).

Usage::

    CHAT = StreamApi(parse=chat_request, whole=chat_answer)      # in the endpoint's api module
    TOKENIZE = PlainApi(parse=tokenize_request, answer=tokenize_answer)
    handler = part(endpoint("chat").mock)                         # the server's route for its path
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True, slots=True)
class Reply:
    """A finished reply, from which an endpoint builds its whole (not streamed) answer."""

    request_id: str
    model: str
    created: int  # Unix seconds of the request's arrival
    text: str
    finish_reason: str
    prompt: int
    completion: int
    cached: int
    tool: tuple[str, str] | None  # a tool call's (id, name): the text is its arguments


@dataclass(frozen=True)
class StreamApi:
    """An endpoint whose reply the engine generates: ``parse(body, default_model)`` reads the request
    (raising ``BadRequest``), ``whole(reply)`` is the answer when the request asked for no stream."""

    parse: Callable[[bytes, str], Any]
    whole: Callable[[Reply], bytes]


@dataclass(frozen=True)
class BodyApi:
    """An endpoint served by a function of its own: ``serve(server, sock, path, headers, body, rx_mono)``
    answers one request; False when the connection must end."""

    serve: Callable[..., bool]


@dataclass(frozen=True)
class PlainApi:
    """An endpoint the API server answers itself, at once, without the engine (``/tokenize``):
    ``parse(body, default_model)`` reads the request (raising ``BadRequest``; its ``tokens`` go in the
    log), ``answer(request, fault_kind, max_model_len)`` is the answer's body and the outcome
    (``completed``, or ``fault:KIND`` when one of the endpoint's own faults shaped it; ``fault_kind`` is
    "" without one). Served by :func:`llmload.mock.front.body_endpoints.serve_plain`."""

    parse: Callable[[bytes, str], Any]
    answer: Callable[[Any, str, int], tuple[bytes, str]]
