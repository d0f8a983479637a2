"""Locust users that stream LLM requests: take a request from the workload, stream it, record it.

Usage (a whole locustfile)::

    from llmload import LLMUser

    class ChatUser(LLMUser):
        input_tokens = "200-400"
        output_tokens = 128

Closed loop by default (``wait_time = constant(0)``): each user sends its next request as soon
as the previous one ends. Command-line options (``--input-tokens``, ``--model``, ...) override
the class attributes.
"""

from __future__ import annotations

import itertools
from typing import Any

from locust import User, constant, task

from llmload.plugin import ENDPOINTS, api_key_from_env, get_plugin
from llmload.protocol import encode_body
from llmload.record import RequestMeta, RequestRecord
from llmload.transport import FastTransport, OpenAITransport
from llmload.workload.base import LLMRequest, Workload
from llmload.workload.synthetic import LengthRange, SyntheticChat

_user_numbers = itertools.count()


class LLMUser(User):
    """Streams chat completions; subclass it and set the class attributes you need."""

    abstract = True
    wait_time = constant(0)
    scenario: str = "chat"  # the name rows and stats carry
    endpoint: str = "chat"  # "chat" or "completions"
    model: str | None = None
    input_tokens: int | str = 256
    output_tokens: int | str = 128
    ignore_eos: bool = False
    transport_name: str | None = None  # "fast" | "openai"; default from --transport

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        self.plugin = get_plugin(environment)
        self.transport: FastTransport | OpenAITransport | None = None
        self.workload: Workload | None = None
        self.user_number = next(_user_numbers)

    # -- lifecycle -------------------------------------------------------------------------------
    def on_start(self) -> None:
        if not self.host:
            raise ValueError("llmload: no server address; pass --host http://HOST:PORT (or set `host` on the user)")
        plugin = self.plugin
        endpoint = plugin.option("endpoint") or self.endpoint
        if endpoint not in ENDPOINTS:
            raise ValueError(f"llmload: endpoint {endpoint!r}: expected one of {', '.join(ENDPOINTS)}")
        api_key = api_key_from_env()
        kind = plugin.option("transport") if plugin.option("transport") != "fast" else (self.transport_name or "fast")
        cls = OpenAITransport if kind == "openai" else FastTransport
        self.transport = cls(self.host, ENDPOINTS[endpoint], api_key=api_key,
                             timeout=float(plugin.option("request_timeout", 600.0)))
        self.workload = self.make_workload(model=self.model or plugin.resolve_model(self.host, api_key),
                                           chat=endpoint == "chat")
        try:
            # Open the connection now: a first wave of users that connects inside its first
            # request measures TCP setup as TTFT (../shared/HOTPATH.md).
            self.transport.connect()
        except OSError:
            pass  # recorded as connect_error by the first request

    def on_stop(self) -> None:
        if self.transport is not None:
            self.transport.close()

    def make_workload(self, model: str, chat: bool) -> Workload:
        """The request source; the synthetic default honours --input-tokens/--output-tokens."""
        p = self.plugin
        return SyntheticChat(
            scenario=p.option("scenario") or self.scenario,
            model=model,
            input_tokens=LengthRange.parse(p.option("input_tokens") or self.input_tokens, "--input-tokens"),
            output_tokens=LengthRange.parse(p.option("output_tokens") or self.output_tokens, "--output-tokens"),
            seed=self.seed(),
            ignore_eos=bool(p.option("ignore_eos")) or self.ignore_eos,
            chat=chat,
        )

    def seed(self) -> int:
        """Reproducible and different per worker and per user: (seed, worker index, user number)."""
        return (int(self.plugin.option("seed", 0)) * 1_000_003 + self.plugin.worker_index) * 100_003 + self.user_number

    # -- the task --------------------------------------------------------------------------------
    @task
    def generate(self) -> None:
        assert self.workload is not None
        request = self.workload.next_request()
        rec = self.send(request)
        self.workload.on_reply(request, rec.text, rec.ok)

    def send(self, request: LLMRequest) -> RequestRecord:
        """Stream one request and record it (also when the test cuts it off)."""
        assert self.transport is not None
        runner = self.environment.runner
        meta = RequestMeta(
            request_id=self.plugin.next_request_id(),
            start_time=0.0,
            scenario=request.scenario,
            max_tokens=request.max_tokens,
            users=runner.user_count if runner is not None else 0,
            worker=self.plugin.worker_index,
            session_id=request.session_id,
            turn=request.turn,
        )
        rec = self.transport.stream(encode_body(request.body()), meta, want_text=request.want_text,
                                    on_cancel=self.plugin.record)
        self.plugin.record(rec)
        return rec


class LLMCompletionsUser(LLMUser):
    """The same against `/v1/completions` (a plain prompt instead of messages)."""

    abstract = True
    endpoint = "completions"
