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

import dataclasses
import itertools
import os
import random
import time
from typing import Any

import gevent
import gevent.lock
from locust import User, constant, task

from llmload.metrics.record import RequestMeta, RequestRecord
from llmload.net.turns import yield_if_turn_is_long
from llmload.plugin.options.seeds import workload_seed
from llmload.plugin.run.user_setup import UserSetup
from llmload.plugin.users.agent_loop import run_agent_task
from llmload.plugin.users.backoff import Backoff
from llmload.plugin.users.graph_loop import ConnectionPool, run_graph_session
from llmload.plugin.users.pipeline_loop import run_pipeline_task, start_pipeline
from llmload.plugin.users.request_source import pick_workload, scenario_workload
from llmload.plugin.users.trace_replay import replay_one
from llmload.plugin.users.whole_body import start_body_workload
from llmload.plugin.wiring import get_plugin
from llmload.transport import Transport, make_transport
from llmload.transport.connection import ClientOptions, for_messages_api
from llmload.wire.endpoints import BODY
from llmload.wire.endpoints import endpoint as endpoint_of
from llmload.workload.affinity import affinity_headers
from llmload.workload.arrival import ArrivalGate
from llmload.workload.file.scenario import WorkloadSpec
from llmload.workload.model_mix import ModelPicker
from llmload.workload.request import LLMRequest, Workload
from llmload.workload.scenario_workload import stable_seed
from llmload.workload.synthetic import SyntheticChat
from llmload.workload.trace.replay import selected_trace

_user_numbers = itertools.count()


class LLMUser(User):
    """Streams chat completions; subclass it and set the class attributes you need.

    ``scenario`` is either a plain name (a synthetic chat workload sized by ``input_tokens`` and
    ``output_tokens``) or a scenario YAML file (``scenarios/rag.yaml``: relative to the current
    directory or to the locustfile). ``workload`` picks one workload of a file with several;
    without it each user draws one by weight (use :func:`users_from_scenario` to get one Locust
    class per workload instead).
    """

    abstract = True
    wait_time = constant(0)
    llmload_user = True  # how llmload.plugin.run.config tells its users from other Locust users

    scenario: str = "chat"
    """A scenario YAML file (``scenarios/rag.yaml``), or a plain name for synthetic chat."""

    workload: str | None = None
    """The workload of a file with several; None: each user draws one by weight."""

    endpoint: str = "chat"
    """``chat``, ``completions``, ``responses`` or ``messages`` (a scenario's workload and ``--endpoint``
    override it)."""

    model: str | None = None
    """Model to request; default: ``--model``, the scenario's, else the server's first model."""

    input_tokens: int | str = 256
    """Synthetic chat: prompt length, ``N`` or ``"LOW-HIGH"`` (``--input-tokens`` overrides)."""

    output_tokens: int | str = 128
    """Synthetic chat: ``max_tokens``, ``N`` or ``"LOW-HIGH"`` (``--output-tokens`` overrides)."""

    ignore_eos: bool = False
    """Send vLLM's ``ignore_eos`` so every reply is exactly ``max_tokens`` long."""

    transport_name: str | None = None
    """``fast`` (default) or ``openai`` (the official SDK); ``--transport`` overrides."""

    def __init__(self, environment: Any) -> None:
        super().__init__(environment)
        self.plugin = get_plugin(environment)
        self.transport: Transport | None = None
        self.source: Workload | None = None
        self.user_number = next(_user_numbers)
        self.scenario_name = self.scenario
        self._cap: gevent.lock.Semaphore | None = None
        self._gate: ArrivalGate | None = None
        self._arrival_rate = 0.0
        self.endpoint_name = "chat"
        self._loop: Any = None  # trace replay, agent tasks or call graphs: the task body instead of one request
        self.connections: ConnectionPool | None = None  # call graphs: more connections for calls that overlap
        self._backoff: Backoff | None = None
        self._trace_context = False
        self._affinity_headers = False  # --affinity-headers: the session or prefix a router can pin by
        self._models: ModelPicker | None = None  # models: the draw of each request's model
        self.priority_class = ""  # the workload's priority: class, written into every row (its value is in the body)
        self.extra_transports: list[Any] = []  # a RAG pipeline's embed and rerank connections

    # -- lifecycle -------------------------------------------------------------------------------
    def on_start(self) -> None:
        setup = self.plugin.setup_for(type(self))  # checked at init; a broken run stops users quietly
        plugin = self.plugin
        scenario_spec = setup.scenario
        spec = pick_workload(scenario_spec, self.workload, self.seed()) if scenario_spec is not None else None
        endpoint = self.endpoint_name = setup.endpoint_for(spec.endpoint if spec else None)
        client = plugin.config.client
        if spec is not None and spec.headers:
            client = dataclasses.replace(client, headers=client.headers + spec.headers,
                                         secrets=client.secrets + spec.header_secrets)
        client = plugin.client_for(self.host, client)  # the key only to the host it is bound to
        self._backoff = Backoff(plugin.config.faults.backoff, random.Random(self.seed() ^ 0x0BAC0FF))
        self._trace_context = bool(plugin.option("trace_context"))
        self._affinity_headers = bool(plugin.option("affinity_headers"))
        if spec is not None and (endpoint_of(spec.endpoint).answer == BODY or spec.pipeline is not None):
            self._start_whole_body(spec, client, setup)
            return
        client = self._auth(client, endpoint)
        path = endpoint_of(endpoint).path
        self.transport = make_transport(setup.transport, self.host, path, client)
        mix = spec.models if spec is not None else None  # models: wins over --model (the mix is the workload)
        model = (mix.names[0] if mix else None) or plugin.option("model") \
            or (spec.model if spec and spec.model else None) or self.model or plugin.resolve_model(self.host, client)
        self._models = None if mix is None else ModelPicker(mix, stable_seed(self.seed(), "models"))
        if plugin.spans is not None:  # --otlp-endpoint: what this scenario's spans name (the record does not)
            plugin.spans.describe(spec.name if spec is not None else self.scenario_name, endpoint, model, self.host)
        if spec is None:
            self.source = self.make_workload(model=model, chat=endpoint_of(endpoint).takes == "messages")
        else:
            self.scenario_name = spec.name
            self.priority_class = spec.priority.name if spec.priority is not None else ""
            self.source = scenario_workload(self, scenario_spec, spec, model, endpoint, setup)
            if spec.trace is not None:
                trace = selected_trace(spec.trace)
                schedule = plugin.replay.schedule_for(spec.name, trace)
                if trace.sessions:  # an agentic trace: a session's calls overlap on connections of their own
                    self.connections = ConnectionPool(self.transport, lambda: make_transport(
                        setup.transport, self.host, path, client))
                self._loop = lambda: replay_one(self, schedule, self.source, trace.rate, self.connections)
            elif spec.agent is not None:
                self._loop = lambda: run_agent_task(self, self.source)
            elif spec.graph is not None:
                self.connections = ConnectionPool(self.transport, lambda: make_transport(
                    setup.transport, self.host, path, client))
                self._loop = lambda: run_graph_session(self, self.source, self.connections)
            shared = plugin.shared
            if spec.max_concurrent:
                self._cap = shared.semaphore(("concurrent", spec.name), spec.max_concurrent)
            if spec.arrival.mode == "open":
                self._arrival_rate = spec.arrival.rate
                self._gate = shared.gate(spec.name, spec.arrival, stable_seed(scenario_spec.seed or 0, self.run_seed(),
                                                                            spec.name, plugin.worker_index))
                if spec.arrival.max_in_flight:
                    self._cap = shared.semaphore(("in_flight", spec.name), spec.arrival.max_in_flight)
        try:
            # Open the connection now: a first wave of users that connects inside its first
            # request measures TCP setup as TTFT (docs/architecture.md#the-hot-path).
            self.transport.connect()
        except OSError:
            pass  # recorded as connect_error by the first request

    def _start_whole_body(self, spec: WorkloadSpec, client: ClientOptions, setup: UserSetup) -> None:
        """A workload with endpoint embeddings, rerank or score, or a RAG pipeline (plugin.whole_body,
        plugin.pipeline_loop): its connections and its task body."""
        plugin = self.plugin
        self.scenario_name = spec.name
        self.priority_class = spec.priority.name if spec.priority is not None else ""  # a pipeline's, in each row
        model = plugin.option("model") or spec.model or self.model or plugin.resolve_model(self.host, client)
        if plugin.spans is not None:  # --otlp-endpoint: what the spans of each of its calls name
            plugin.spans.describe_whole_body(spec, model, self.host, self.endpoint_name)
        if spec.pipeline is None:
            start_body_workload(self, spec, client, model)
        else:
            chat_client = self._auth(client, self.endpoint_name)
            self.transport = make_transport(setup.transport, self.host, endpoint_of(self.endpoint_name).path,
                                            chat_client)
            calls = start_pipeline(self, spec, client, model)
            self.extra_transports = calls.transports()
            self._loop = lambda: run_pipeline_task(self, calls)
        for transport in (self.transport, *self.extra_transports):
            try:
                transport.connect()  # in on_start: no TCP connect inside the first request
            except OSError:
                pass  # recorded as connect_error by the first request

    def _auth(self, client: ClientOptions, endpoint: str) -> ClientOptions:
        """The client options for ``endpoint``'s way of sending the key: Anthropic's x-api-key and
        anthropic-version for the Messages API (the /v1/models probe too)."""
        if endpoint_of(endpoint).auth == "anthropic":
            return for_messages_api(client, key_header_given=bool(self.plugin.option("api_key_header")))
        return client

    def on_stop(self) -> None:
        for transport in self.extra_transports:
            transport.close()
        if self.connections is not None:
            self.connections.close_extra()
        if self.transport is not None:
            self.transport.close()

    def make_workload(self, model: str, chat: bool) -> Workload:
        """The request source when ``scenario`` is a plain name: synthetic chat sized by
        --input-tokens/--output-tokens or the class attributes. Override for your own."""
        setup = self.plugin.setup_for(type(self))
        return SyntheticChat(
            scenario=setup.scenario_name,
            model=model,
            input_tokens=setup.input_lengths,
            output_tokens=setup.output_lengths,
            seed=self.seed(),
            ignore_eos=setup.ignore_eos,
            chat=chat,
            text=self.plugin.shared.text_source(self.run_seed() + self.plugin.worker_index, None),
        )

    def run_seed(self) -> int:
        """The seed this class draws its requests from (:func:`llmload.plugin.options.seeds.workload_seed`):
        ``--seed``, else its scenario file's ``seed:``, else the run's fresh one."""
        return workload_seed(self.environment.parsed_options, self.plugin.setup_for(type(self)).scenario)

    def seed(self) -> int:
        """Reproducible and different per worker and per user: (seed, worker index, user number)."""
        return (self.run_seed() * 1_000_003 + self.plugin.worker_index) * 100_003 + self.user_number

    # -- the task --------------------------------------------------------------------------------
    @task
    def generate(self) -> None:
        if self._loop is not None:  # a trace entry at its time, or a whole agent task
            self._loop()
            return
        assert self.source is not None
        request = self.source.next_request()
        if request.wait_s > 0:
            gevent.sleep(request.wait_s)  # think time between the turns of a session
        scheduled = rate = None
        if self._gate is not None:
            scheduled = self._gate.take()
            rate = self.plugin.rate_override or self._arrival_rate
        rec = self.send_capped(request, scheduled, rate)
        self.source.on_reply(request, rec.text, rec.ok)

    def send_capped(self, request: LLMRequest, scheduled_time: float | None = None,
                    arrival_rate: float | None = None, body: bytes | None = None,
                    transport: Transport | None = None) -> RequestRecord:
        """:meth:`send` within the workload's concurrency cap, if it has one."""
        if self._cap is not None:
            with self._cap:
                return self.send(request, scheduled_time, arrival_rate, body, transport)
        return self.send(request, scheduled_time, arrival_rate, body, transport)

    def send(self, request: LLMRequest, scheduled_time: float | None = None,
             arrival_rate: float | None = None, body: bytes | None = None,
             transport: Transport | None = None) -> RequestRecord:
        """Stream one request and record it (also when the test cuts it off). ``body``: the
        request already encoded (a trace entry is encoded before its due time). ``transport``: a
        connection of the user's own for a call that runs beside another (a call graph's fan-out)."""
        transport = transport or self.transport
        assert transport is not None
        if scheduled_time is None:  # a send due at a time (trace, open-loop arrivals) goes out then
            yield_if_turn_is_long()
        runner = self.environment.runner
        if self._models is not None and body is None:  # a body built ahead (traces) keeps its model
            request.model = self._models.pick(request.session_id)
        meta = RequestMeta(
            request_id=self.plugin.next_request_id(),
            start_time=0.0,
            scenario=request.scenario,
            max_tokens=request.max_tokens,
            users=runner.user_count if runner is not None else 0,
            worker=self.plugin.worker_index,
            session_id=request.session_id,
            turn=request.turn,
            scheduled_time=scheduled_time,
            requested_input_tokens=request.input_tokens,
            resent_input_tokens=request.resent_tokens,
            arrival_rate=arrival_rate,
            step_kind=request.step_kind,
            requested_image_tokens=request.image_tokens,
            call_id=request.call_id,
            call_after=request.call_after,
            model=request.model if self._models is not None else "",
            priority=self.priority_class,
        )
        headers = request.headers
        if self._affinity_headers:
            headers = affinity_headers(request.session_id, request.prefix_id, headers)
        if self._trace_context:  # a new trace per request: 16 + 8 random bytes, far below a token's cost
            meta.trace_id, meta.span_id = os.urandom(16).hex(), os.urandom(8).hex()
            headers = {**(headers or {}), "traceparent": f"00-{meta.trace_id}-{meta.span_id}-01"}
        if body is None:
            body = request.encode(self.endpoint_name)
        in_flight = self.plugin.in_flight
        in_flight[request.scenario] = in_flight.get(request.scenario, 0) + 1
        try:
            rec = transport.stream(body, meta, want_text=request.want_text, headers=headers,
                                   on_cancel=self.plugin.record)
        finally:
            in_flight[request.scenario] -= 1
        try:
            yield_if_turn_is_long()  # streams that end together are recorded over several turns
        except BaseException:  # killed meanwhile (the end of a test): the request still counts
            self.plugin.record(rec)
            raise
        wait_s = self._backoff.after(rec.status, rec.http_status, rec.retry_after, time.time()) \
            if self._backoff is not None else 0.0
        if wait_s > 0:
            rec.backoff_ms = wait_s * 1000.0
        self.plugin.record(rec)
        if wait_s > 0:
            gevent.sleep(wait_s)  # 429/503/unreachable: no hot loop of instant failures (llmload.plugin.users.backoff)
        return rec


class LLMCompletionsUser(LLMUser):
    """The same against `/v1/completions` (a plain prompt instead of messages)."""

    abstract = True
    endpoint = "completions"


