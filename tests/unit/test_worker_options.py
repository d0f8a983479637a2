"""What a master sends its workers, and what a worker takes from it (issue 19, rows 3 and 7):
no secret value leaves the master; a worker opens only files its own command line names."""

from __future__ import annotations

import os

import pytest
from locust.rpc import Message

from llmload.plugin.options.shipped_options import (
    for_workers,
    own_host,
    own_or_master,
    send_without_secrets,
    spawn_for_workers,
)
from llmload.plugin.run.worker_guard import WorkerGuard

MASTER = {"header": ["Authorization: Bearer sk-lit-1234", "X-Api-Key: k-5678", "X-Team: blue",
                     "X-Tenant-Token: env:TENANT"],
          "query": ["api-key=q-9012", "api-version=2024-10-21"], "cluster_token": "join-3456", "model": "m"}


def test_the_master_ships_no_literal_secret_and_no_cluster_token():
    shipped = for_workers(MASTER)
    text = repr(shipped)
    for secret in ("sk-lit-1234", "k-5678", "q-9012", "join-3456"):
        assert secret not in text
    assert shipped["master_header"] == ["Authorization: ***", "X-Api-Key: ***", "X-Team: blue",
                                        "X-Tenant-Token: env:TENANT"]
    assert shipped["master_query"] == ["api-key=***", "api-version=2024-10-21"]
    assert "header" not in shipped and "query" not in shipped and "cluster_token" not in shipped
    assert shipped["model"] == "m"
    assert MASTER["header"][0] == "Authorization: Bearer sk-lit-1234"  # the master's own are untouched


def test_a_spawn_message_loses_its_secrets_on_the_way_out_and_others_pass_untouched():
    sent = []

    class Server:
        def send_to_client(self, msg):
            sent.append(msg)

    class Runner:
        server = Server()

    runner = Runner()
    send_without_secrets(runner)
    data = {"host": "https://u:pw-7890@h:8000/v1?api-key=h-1111&x=1", "parsed_options": dict(MASTER),
            "user_classes_count": {"ChatUser": 2}}
    runner.server.send_to_client(Message("spawn", data, "w1"))
    runner.server.send_to_client(Message("llmload_rows", {"header": ["X-Api-Key: k-5678"]}, "w1"))
    spawn, other = sent
    assert spawn.type == "spawn" and spawn.node_id == "w1"
    assert "pw-7890" not in repr(spawn.data) and "h-1111" not in repr(spawn.data) and "k-5678" not in repr(spawn.data)
    assert spawn.data["user_classes_count"] == {"ChatUser": 2}
    assert other.data == {"header": ["X-Api-Key: k-5678"]}
    assert data["parsed_options"]["header"] == MASTER["header"]  # the master's own dict is not changed


def test_a_worker_takes_the_masters_headers_with_each_withheld_value_from_its_own():
    worker = {**spawn_for_workers({"parsed_options": MASTER})["parsed_options"],
              "header": ["x-api-key: k-own", "Authorization: Bearer sk-own"], "query": ["API-KEY=q-own"]}
    assert own_or_master(worker, "header") == ["Authorization: Bearer sk-own", "x-api-key: k-own", "X-Team: blue",
                                               "X-Tenant-Token: env:TENANT"]
    assert own_or_master(worker, "query") == ["API-KEY=q-own", "api-version=2024-10-21"]


def test_a_worker_without_a_withheld_value_gets_one_line_naming_the_header():
    worker = {**for_workers(MASTER), "header": ["Authorization: Bearer sk-own"], "query": ["api-key=q"]}
    with pytest.raises(ValueError) as e:
        own_or_master(worker, "header")
    assert str(e.value).startswith("--header X-Api-Key: the master does not send secret values to its workers")
    assert "LLMLOAD_HEADER" in str(e.value) and "\n" not in str(e.value)
    with pytest.raises(ValueError, match=r"^--query api-key"):
        own_or_master({**for_workers(MASTER), "query": []}, "query")


def test_a_process_without_a_master_uses_its_own():
    assert own_or_master({"header": ["X-Api-Key: k"]}, "header") == ["X-Api-Key: k"]
    assert own_or_master({}, "query") == []


def test_a_host_with_a_secret_comes_from_the_workers_own_command_line():
    host = "https://u:pw-7890@h:8000/v1?api-key=h-1111"
    shipped = spawn_for_workers({"host": host})["host"]
    assert "pw-7890" not in shipped and "h-1111" not in shipped
    assert own_host(shipped, host) == host
    assert own_host("http://h:8000", None) == "http://h:8000"
    with pytest.raises(ValueError, match=r"^--host: the master's host .* start this worker with the same --host$"):
        own_host(shipped, None)


def test_a_master_cannot_make_a_worker_open_files_of_its_choosing(tmp_path):
    (tmp_path / "scenarios").mkdir()
    (tmp_path / "scenarios" / "rag.yaml").write_text("workloads: {}\n")
    guard = WorkerGuard({"calibration": "", "ca_bundle": None, "scenario": ""}, [str(tmp_path)])
    asked = {"calibration": "/dev/zero", "ca_bundle": "/etc/shadow", "scenario": "chat", "model": "m"}
    warnings = guard.restore(asked)
    assert asked == {"calibration": "", "ca_bundle": None, "scenario": "chat", "model": "m"}
    assert len(warnings) == 2 and "calibration '/dev/zero' (names a file)" in warnings[0]
    inside = {"scenario": str(tmp_path / "scenarios" / "rag.yaml")}
    assert guard.restore(inside) == [] and inside["scenario"].endswith("rag.yaml")
    os.symlink("/etc", tmp_path / "escape")
    for hostile in ("/etc/passwd.yaml", str(tmp_path / "escape" / "x.yaml"), str(tmp_path / ".." / "x.yaml")):
        with pytest.raises(ValueError, match=r"^--scenario .*: the master names a file outside this worker's"):
            guard.restore({"scenario": hostile})


def test_a_worker_keeps_a_scenario_it_was_given_itself():
    guard = WorkerGuard({"scenario": "/srv/scenarios/rag.yaml"}, ["/nowhere"])
    assert guard.restore({"scenario": "/srv/scenarios/rag.yaml"}) == []
