"""What every whole-body workload hands its user, and what it is made with. Pure.

A whole-body endpoint's workload (``workload`` in its :class:`~llmload.wire.endpoints.Endpoint`) is
made by ``from_spec(spec, model, context)`` and gives :class:`BodyRequest` s; the user sends each
body, holds the answer to it with the endpoint's ``check`` (called with the answer and
``request.check``) and records it: one loop for every whole-body endpoint
(:mod:`llmload.plugin.users.whole_body`).

Usage::

    work = part(endpoint("rerank").workload)(spec, "bge-reranker", context)
    request = work.next_request()      # BodyRequest(scenario, body, inputs, tokens, check)
    verdict = part(endpoint("rerank").check)(answer_bytes, *request.check)
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from llmload.workload.text import TextSource


@dataclass(frozen=True, slots=True)
class BodyRequest:
    """One request to send whole: its body, what its row says it sent (``inputs``: the batch's texts,
    the query's passages, ...; ``tokens``: the tokens its texts were drawn as), and the arguments of
    its endpoint's check after the answer."""

    scenario: str
    body: bytes
    inputs: int
    tokens: int
    check: tuple[Any, ...] = ()


@dataclass(frozen=True)
class BodyContext:
    """What a whole-body workload is made with: the user's seed, the run's, the process's index and
    text source, and ``cached(key, make, run_seed)``: one object per process and key (a new run seed
    makes it again)."""

    user_seed: int
    run_seed: int
    worker: int
    text: TextSource | None
    cached: Callable[[tuple, Callable[[], Any], int], Any]


class BodyWorkload(Protocol):
    def next_request(self) -> BodyRequest: ...
