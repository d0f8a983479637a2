"""The roles of a Locust process and the declared inter-process protocol: a local process loops its
messages back, the master and a worker route them by direction, a worker of another protocol
version is refused, and no message name is typed outside the table."""

from __future__ import annotations

import ast
import logging
import os
import re
import types

import pytest
from locust.env import Environment
from locust.event import Events

from llmload.metrics.record import RequestMeta, RequestRecord
from llmload.metrics.stats import LLMStats
from llmload.plugin.cluster import messages
from llmload.plugin.cluster.roles import LocalRole, MasterRole
from llmload.plugin.cluster.worker_role import WorkerRole
from llmload.plugin.output import prometheus_export
from llmload.plugin.wiring import LLMLoadPlugin
from tests.support.processes import ROOT

PLUGIN = os.path.join(ROOT, "llmload", "plugin")
# a user class's marker, a manifest key, and llmload's own Prometheus metrics (plugin.prometheus_export)
NOT_MESSAGES = {"llmload_user", "llmload_version", *prometheus_export.NAMES}


class FakeRunner:
    """What the links and roles use of a Locust master or worker runner."""

    def __init__(self) -> None:
        self.environment = types.SimpleNamespace(events=Events(), parsed_options=None)
        self.custom_messages: dict = {}
        self.sent: list[tuple[str, object, str | None]] = []
        self.clients = {"w1": object(), "w2": object()}
        self.client_id = "w1"
        self.worker_index = 3

    def register_message(self, name, listener, concurrent=False):
        assert name not in self.custom_messages, name
        self.custom_messages[name] = (listener, concurrent)

    def send_message(self, name, data=None, client_id=None):
        self.sent.append((name, data, client_id))

    def stop(self):
        pass


def parts_for(runner):
    env = types.SimpleNamespace(runner=runner, parsed_options=None, process_exit_code=None)
    return types.SimpleNamespace(env=env, pending_rows=[], stats=LLMStats(), option=lambda name, default=None: None,
                                 run=types.SimpleNamespace(run_id="r1"))


def test_a_local_role_loops_a_message_back_to_its_own_handler():
    role = LocalRole(parts_for(None))
    got = []
    role.handle(messages.TRACE_DONE, lambda data, node_id: got.append((data, node_id)))
    done = messages.TRACE_DONE.payload(index=0, token="", version=messages.PROTOCOL_VERSION)
    role.send(messages.TRACE_DONE, done)
    role.send(messages.RATE, messages.RATE.payload(rate=2.0))  # nobody handles it here: dropped
    assert got == [(done, "local")]
    assert role.load_processes() == {"local"} and role.leads and role.generates_load


def test_the_plugin_of_a_local_run_gets_its_own_rate_message_and_trace_clock():
    plugin = LLMLoadPlugin(Environment())
    assert isinstance(plugin.role, LocalRole)
    plugin.role.send(messages.RATE, messages.RATE.payload(rate=3.0))  # as a worker gets it from its master
    assert plugin.rate_override == 3.0
    plugin.replay._on_test_start(plugin.env)
    assert plugin.replay.t0 is not None  # the leader's t0, delivered to itself


def test_the_master_broadcasts_to_workers_and_delivers_worker_messages_to_itself():
    runner = FakeRunner()
    role = MasterRole(parts_for(runner))
    role.send(messages.RATE, messages.RATE.payload(rate=5.0))
    assert runner.sent == [("llmload_rate", {"rate": 5.0}, "w1"), ("llmload_rate", {"rate": 5.0}, "w2")]
    got = []
    role.handle(messages.TRACE_DONE, lambda data, node_id: got.append((data, node_id)))
    done = messages.TRACE_DONE.payload(index=0, token="", version=messages.PROTOCOL_VERSION)
    role.send(messages.TRACE_DONE, done)
    assert got == [(done, "master")] and len(runner.sent) == 2


def test_a_worker_sends_to_the_master_and_delivers_master_messages_to_itself():
    runner = FakeRunner()
    parts = parts_for(runner)
    from llmload.plugin.output.run_files import RunFiles

    parts.files = RunFiles(parts.run, on_failure=lambda e: None)
    role = WorkerRole(parts)
    done = messages.TRACE_DONE.payload(index=3, token="", version=messages.PROTOCOL_VERSION)
    role.send(messages.TRACE_DONE, done)
    assert runner.sent == [("llmload_trace_done", done, None)]
    handler, _ = runner.custom_messages["llmload_processes"]
    handler(environment=None, msg=types.SimpleNamespace(data=messages.PROCESSES.payload(
        n=4, csv="runs/x", csv_dir="/m/runs", csv_dir_id=[5, 6], run_id="r9", version=messages.PROTOCOL_VERSION),
        node_id="master"))
    assert role.processes == 4 and parts.files.master_prefix == "runs/x" and parts.run.run_id == "r9"
    assert (parts.files.master_dir, parts.files.master_dir_id) == ("/m/runs", (5, 6))
    assert role.worker_index == 3 and not role.leads


def test_the_master_refuses_a_worker_of_another_protocol_version_once(caplog):
    runner = FakeRunner()
    parts = parts_for(runner)
    MasterRole(parts)  # its link listens to the worker reports
    worker = LLMStats()
    meta = RequestMeta(request_id="a-1", start_time=100.0, scenario="chat", max_tokens=8, users=1)
    worker.add(RequestRecord(meta=meta, status="ok", ttft_ms=10.0, e2e_ms=20.0, completion_tokens=8),
               track_delta=True)
    old = {"stats": worker.take_delta(), "rows": [], "index": 0}  # no version: an llmload before the table
    with caplog.at_level(logging.ERROR, logger="llmload"):
        for _ in range(2):
            runner.environment.events.worker_report.fire(client_id="w1", data={messages.REPORT_KEY: old})
    assert parts.stats.scenarios == {}  # nothing merged
    said = [r.getMessage() for r in caplog.records]
    assert len(said) == 1 and "worker w1 ignored: protocol version 1" in said[0]


def test_every_llmload_string_in_the_plugin_is_a_declared_message_used_through_the_table():
    declared = {m.name for m in messages.TABLE}
    assert len(declared) == len(messages.TABLE) == 14
    assert {m.direction for m in messages.TABLE} == {messages.WORKER_TO_MASTER, messages.MASTER_TO_WORKER}
    typed: dict[str, list[str]] = {}
    sources = sorted(os.path.relpath(os.path.join(d, f), PLUGIN) for d, _, fs in os.walk(PLUGIN) for f in fs
                     if f.endswith(".py"))  # every sub-package of the plugin
    assert "cluster/messages.py" in sources and "cluster/links.py" in sources
    for f in sources:
        with open(os.path.join(PLUGIN, f), encoding="utf-8") as src:
            tree = ast.parse(src.read())
        for node in ast.walk(tree):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) \
                    and re.fullmatch(r"llmload_\w+", node.value):
                typed.setdefault(node.value, []).append(f)
    undeclared = {s: fs for s, fs in typed.items() if s not in declared | NOT_MESSAGES}
    assert not undeclared, f"llmload_* strings not in messages.TABLE: {undeclared}"
    elsewhere = {s: fs for s, fs in typed.items() if s in declared and fs != ["cluster/messages.py"]}
    assert not elsewhere, f"message names typed outside messages.py (use the table): {elsewhere}"


def test_a_payload_has_exactly_the_declared_fields():
    assert messages.USERS.payload(t=1.0, n=2, token="", version=4) == {"t": 1.0, "n": 2, "token": "", "version": 4}
    with pytest.raises(ValueError, match="llmload_users: payload fields"):
        messages.USERS.payload(t=1.0, count=2)


def test_the_stats_wire_format_has_named_fields_and_round_trips():
    stats = LLMStats()
    meta = RequestMeta(request_id="a-1", start_time=100.0, scenario="chat", max_tokens=8, users=1)
    stats.add(RequestRecord(meta=meta, status="ok", ttft_ms=10.0, e2e_ms=20.0, completion_tokens=8,
                            prompt_tokens=30, cached_tokens=12), track_delta=True)
    wire = stats.take_delta()["chat"]
    assert all(len(k) > 2 for k in wire), sorted(wire)
    assert wire["statuses"] == {"ok": 1} and wire["output_tokens"] == 8 and wire["cached_tokens"] == 12
    merged = LLMStats()
    merged.merge_wire({"chat": wire})
    assert merged.rows() == stats.rows()


def _deliver(runner, message, data, node_id="master"):
    handler, _ = runner.custom_messages[message.name]
    handler(environment=None, msg=types.SimpleNamespace(data=data, node_id=node_id))


def test_a_worker_that_missed_the_trace_clock_asks_for_it_and_waits():
    """Locust connects a worker to its master before the init event that makes llmload's handlers:
    the master's t0 can come before the worker listens. The worker's first user asks again and waits
    for the answer; it does not start its share on a clock of its own (its requests would then be off
    the other workers' by the gap, seen once under load: 0.67 s)."""
    import gevent

    from llmload.plugin.users.trace_replay import ReplayLink
    from llmload.workload.file.spec import TraceSpec
    from llmload.workload.trace.replay import selected_trace

    runner = FakeRunner()
    parts = parts_for(runner)
    parts.files = types.SimpleNamespace(take_master_csv=lambda data: None)
    role = WorkerRole(parts)
    link = ReplayLink(runner.environment, role)
    info = messages.PROCESSES.payload(n=4, csv="", csv_dir="", csv_dir_id=None, run_id="r", version=3)
    _deliver(runner, messages.PROCESSES, info)
    trace = selected_trace(TraceSpec(path=os.path.join(ROOT, "scenarios", "data", "traces", "mooncake_sample.jsonl")))
    user = gevent.spawn(link.schedule_for, "replay", trace)
    gevent.sleep(0.05)
    assert [name for name, _, _ in runner.sent] == ["llmload_trace_t0_ask"] and not user.ready()
    _deliver(runner, messages.TRACE_T0, messages.TRACE_T0.payload(t0=1234.5))
    schedule = user.get(timeout=2)
    assert link.t0 == 1234.5 and schedule.t0 == 1234.5


def test_the_master_answers_a_worker_that_asks_for_the_trace_clock_with_the_same_t0():
    from llmload.plugin.users.trace_replay import ReplayLink

    runner = FakeRunner()
    runner.environment.runner = types.SimpleNamespace(target_user_count=8, spawn_rate=8)
    role = MasterRole(parts_for(runner))
    link = ReplayLink(runner.environment, role)
    link._on_test_start(runner.environment)
    first = [d for name, d, _ in runner.sent if name == "llmload_trace_t0"]
    ask = messages.TRACE_T0_ASK.payload(token="", version=messages.PROTOCOL_VERSION)
    _deliver(runner, messages.TRACE_T0_ASK, ask, node_id="w2")
    again = [d for name, d, _ in runner.sent if name == "llmload_trace_t0"]
    assert len(first) == 2 and len(again) == 4 and {d["t0"] for d in again} == {link.t0}  # both workers, twice
