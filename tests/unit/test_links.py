"""The master's wait for every worker's final data at stop (plugin/cluster/links.py), on a fake clock.

A worker that Locust calls missing (no heartbeat for ~4 s: its loop held up or the process not
scheduled on a loaded machine) but that spoke moments ago is still waited for; a worker silent
since long before the stop (killed) is given up on after the short grace.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from locust.event import Events

from llmload.plugin.cluster import links
from llmload.plugin.cluster.master_link import GONE_AFTER_SILENT_S, MISSING_GRACE_S, MasterLink
from tests.support import payloads

pytestmark = pytest.mark.unit


class FakeClock:
    """Time that passes only when the link sleeps; ``at`` runs a callback once its moment comes."""

    def __init__(self) -> None:
        self.t = 1000.0
        self._due: list[tuple[float, object]] = []

    def __call__(self) -> float:
        return self.t

    def at(self, t: float, fn) -> None:
        self._due.append((t, fn))

    def sleep(self, s: float) -> None:
        self.t += s
        for item in [d for d in self._due if d[0] <= self.t]:
            self._due.remove(item)
            item[1]()


class FakeRunner:
    def __init__(self, workers: dict[str, str]) -> None:
        self.environment = SimpleNamespace(events=Events())
        self.clients = {cid: SimpleNamespace(state=state) for cid, state in workers.items()}
        self.handlers: dict[str, object] = {}
        self.sent: list[tuple[str, str | None]] = []

    def register_message(self, name: str, fn, concurrent: bool = False) -> None:
        self.handlers[name] = fn

    def send_message(self, name: str, data, client_id: str | None = None) -> None:
        self.sent.append((name, client_id))


def master_link(workers: dict[str, str]) -> tuple[MasterLink, FakeRunner, FakeClock]:
    runner, clock = FakeRunner(workers), FakeClock()
    link = MasterLink(runner, lambda client_id, payload: None)
    link.clock, link.sleep = clock, clock.sleep
    link.start()
    return link, runner, clock


def final_from(runner: FakeRunner, client_id: str):
    msg = SimpleNamespace(node_id=client_id, data=payloads.final(index=1))
    return lambda: runner.handlers["llmload_final"](environment=None, msg=msg)


def test_a_missing_worker_that_spoke_just_now_is_waited_for():
    link, runner, clock = master_link({"w0": "running", "w1": "running"})
    clock.t += 3.0
    link.heard("w1")  # its last rows came just before the stop; then its loop was held up
    runner.clients["w1"].state = "missing"  # Locust's heartbeat count ran out meanwhile
    final_from(runner, "w0")()
    asked = clock.t
    clock.at(asked + 6.0, final_from(runner, "w1"))  # 6 s late: past the old 2-s grace
    link.collect_finals(stop_timeout=30.0)
    assert ("llmload_stop", "w1") in runner.sent
    assert link.finals == {"w0", "w1"} and link.lost() == []
    assert clock.t - asked < 6.2  # went on as soon as it came


def test_a_worker_silent_since_long_before_the_stop_is_given_up_on_after_the_grace():
    link, runner, clock = master_link({"w0": "running", "w1": "running"})
    clock.t += GONE_AFTER_SILENT_S  # w1 was killed at the start: nothing from it since
    link.heard("w0")
    runner.clients["w1"].state = "missing"
    final_from(runner, "w0")()
    asked = clock.t
    link.collect_finals(stop_timeout=30.0)
    assert MISSING_GRACE_S <= clock.t - asked < MISSING_GRACE_S + 0.2
    assert [cid for _, cid, _ in link.lost()] == ["w1"]


def test_a_missing_worker_is_given_up_on_once_silent_long_enough():
    link, runner, clock = master_link({"w1": "missing"})
    asked = clock.t  # heard at the start (start() counts as heard), never again
    link.collect_finals(stop_timeout=30.0)
    assert GONE_AFTER_SILENT_S <= clock.t - asked < GONE_AFTER_SILENT_S + 0.2
    assert link.finals == set()


def test_a_heartbeat_counts_as_a_sign_of_life():
    link, runner, clock = master_link({"w1": "running"})
    clock.t += 50.0
    runner.environment.events.heartbeat_sent.fire(client_id="w1", timestamp=0.0)
    assert link.last_heard["w1"] == clock.t
    assert not link._gone("w1", clock.t + GONE_AFTER_SILENT_S - 1)
    runner.clients["w1"].state = "missing"
    assert link._gone("w1", clock.t + GONE_AFTER_SILENT_S)
    assert MISSING_GRACE_S < GONE_AFTER_SILENT_S


def test_time_the_master_itself_was_not_running_is_not_a_workers_silence():
    # The master process starved for 20 s: its workers' messages wait unread in the socket, and Locust,
    # also not running, may call them missing; the final comes as soon as the master reads again.
    link, runner, clock = master_link({"w1": "missing"})
    asked = clock.t
    starve = {"left": 1}
    plain = clock.sleep

    def sleep(s: float) -> None:
        if starve["left"]:
            starve["left"] -= 1
            s = GONE_AFTER_SILENT_S + 8.0
        plain(s)
    link.sleep = sleep
    clock.at(asked + GONE_AFTER_SILENT_S + 9.0, final_from(runner, "w1"))  # read 1 s after the master woke
    link.collect_finals(stop_timeout=30.0)
    assert link.finals == {"w1"} and link.lost() == []


def test_a_final_whose_rows_cannot_be_taken_still_counts_as_the_workers_last_word(caplog):
    written = []

    def ingest(client_id, payload):
        if client_id == "w1":
            raise ValueError("a bad row")
        written.append(client_id)
    runner, clock = FakeRunner({"w1": "running", "w2": "running"}), FakeClock()
    link = MasterLink(runner, ingest)
    link.clock, link.sleep = clock, clock.sleep
    link.start()
    final_from(runner, "w1")()
    final_from(runner, "w2")()
    link.queue.flush()  # the writer logs a payload it cannot write; the wait must not hang on it
    assert link.finals == {"w1", "w2"} and written == ["w2"]
    assert "a payload of worker w1 could not be written" in caplog.text and "a bad row" in caplog.text


def test_a_worker_whose_final_stats_fail_still_sends_its_rows_as_its_final():
    class Runner(FakeRunner):
        def send_message(self, name, data, client_id=None):
            self.sent.append((name, data))

    runner = Runner({})

    def take_payload():
        raise RuntimeError("stats broke")
    rows = [("w1a-1",), ("w1a-2",)]
    link = links.WorkerLink(runner, take_payload, lambda: None, rows, token="t")
    link.send_final()
    (name, data), = runner.sent
    assert name == "llmload_final" and data["final"] is True
    assert data["rows"] == [("w1a-1",), ("w1a-2",)] and "stats broke" in data["error"] and rows == []


def test_a_stop_that_fails_half_way_still_sends_the_final_data():
    runner = FakeRunner({})
    sent = []
    runner.send_message = lambda name, data, client_id=None: sent.append(name)

    def stop():
        raise RuntimeError("greenlet killed")
    links.WorkerLink(runner, lambda: {"rows": []}, stop, [])
    runner.handlers["llmload_stop"](environment=None, msg=None)
    assert sent == ["llmload_final"]
