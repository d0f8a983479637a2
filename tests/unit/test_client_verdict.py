"""The client's verdict over a run (issue 32, items 7, 8, 10, 11): stall causes a user can act on,
one short line with each piece of advice once, whether any request's timing was touched, and the
same verdict for the end-of-run summary and the live dashboard over the same intervals."""

from __future__ import annotations

import json

from llmload.health.fleet import ClientView
from llmload.health.run_verdict import ClientRun, client_details, client_line, new_timing
from llmload.health.stall_names import WEB_UI, greenlet_name
from llmload.health.stalls import HUB, OFF_CPU, StallStats
from llmload.health.verdict import ACTION, describe, verdict
from llmload.metrics import catalog
from llmload.plugin.output.end_of_run import end_of_run_text
from llmload.plugin.output.live import LiveHistory, LiveWindow

BUSY_MACHINE = {"cpu": 11.0, "lag_p90_ms": 51.8, "lag_p99_ms": 447.3, "steal_pct": 0.0, "others_cpu": 85.0,
                "run_queue": 5.8, "cores": 1, "machine_cores": 2, "tps": 100.0, "streams": 8, "stall_max_ms": 0.0,
                "stall_culprit": ""}
OK_SAMPLE = {**BUSY_MACHINE, "lag_p90_ms": 0.5, "lag_p99_ms": 1.0, "others_cpu": 0.0, "run_queue": 0.2}


def row(scenario: str = "chat", **kw) -> dict:
    r = {"scenario": scenario, "requests": 10, "ok": 10, "failures": 0, "rps": 1.0, "output_tps": 1.0}
    return {**r, **{c: None for m in catalog.METRICS for c in m.stats_columns()}, **kw}


def judged(sample: dict) -> dict:
    limited, cause, advice = verdict(sample)
    return {**sample, "limited": limited, "cause": cause, "advice": advice}


def many_stalls() -> StallStats:
    s = StallStats()
    s.turns = 607
    for i in range(50):
        s.add(2.5 + i % 9, 1.0, OFF_CPU)
    for i in range(96):
        s.add(3.0 + i % 40, 3.0, "user EmbedUser")
    s.add(218.8, 20.0, "user EmbedUser")
    s.add(9.0, 9.0, HUB)
    s.gc_passes = [3, 1, 0]
    return s


# -- item 7: causes a user can act on, advice once ------------------------------------------------
def test_stall_causes_name_what_a_user_can_act_on():
    from gevent import baseserver

    from llmload.plugin import wiring

    class Server:
        def handle(self, *a):
            pass

    # gevent's server runs each web UI connection in a greenlet of this module-level function
    assert greenlet_name(None, baseserver._handle_and_close_when_done, (Server().handle, None, ())) == WEB_UI
    assert "_handle_and_close_when_done" not in WEB_UI and "web UI" in WEB_UI
    plugin = wiring.LLMLoadPlugin.__new__(wiring.LLMLoadPlugin)
    name = greenlet_name(None, plugin._sample_history_forever, ())
    assert name == "llmload's own work (sampling the live history)", name
    assert greenlet_name(None, lambda: None, ()).endswith("<lambda>")  # the user's own code keeps its name
    assert HUB.startswith("llmload's own HTTP handling")


def test_each_limited_interval_gives_its_reason_and_the_advice_comes_once():
    run = ClientRun(2.0)
    for at in (4.0, 6.0, 42.0):
        run.judge(at, [{**judged(BUSY_MACHINE), "worker": 0}])
    text = client_line(run, StallStats(), new_timing())
    # the verdict said "free the machine or run the load generator on another" per interval and the
    # summary "free the machine or move the load generator" once more: one action, once
    assert text.count("free the machine") == 1 and text.count(ACTION["machine"]) == 1, text
    assert "in 3 intervals of 2 s (last at 0:42: worker 0: CPU 11 %" in text
    assert "the machine is busy, not this process (other processes 85 %" in text  # the reason stays


# -- item 8: one short line; the details in run.json and behind --verbose -------------------------
class History:
    error_intervals: list[str] = []

    def __init__(self, run: ClientRun) -> None:
        self.client = run


def test_the_client_line_is_short_and_the_details_go_to_run_json_or_verbose():
    view = ClientView()
    view.stalls = many_stalls()
    view.timing = {"requests": 283, "coalesced": 0, "clock_in_stall": 0}
    rows = [row("embeddings", requests=283, ok=279, rps=36.6, output_tps=0.0)]
    text = end_of_run_text(rows, {}, History(ClientRun(2.0)), "", 2.0, [], "runs/emb", clients=view)
    lines = [line for line in text.splitlines() if line.startswith("client")]
    assert len(lines) == 1 and len(lines[0]) < 300, lines
    assert "garbage collector" not in text and "by length" not in text
    assert lines[0].endswith("(details: --verbose, runs/emb_run.json)")
    verbose = end_of_run_text(rows, {}, History(ClientRun(2.0)), "", 2.0, [], None, clients=view, verbose=True)
    assert "client details:" in verbose and "garbage collector: 4 passes" in verbose and "by length" in verbose
    details = json.loads(json.dumps(client_details(ClientRun(2.0), view.stalls, view.timing)))
    assert details["verdict"] == lines[0].split(" (details:")[0]
    assert details["stalls"]["count"] == 148 and "by cause" in details["stalls"]["text"]


# -- item 10: "not limited" says whether any request's timing was touched ------------------------
def test_not_limited_says_whether_a_stall_touched_any_timing():
    stalls = many_stalls()
    clean = client_line(ClientRun(2.0), stalls, {"requests": 283, "coalesced": 0, "clock_in_stall": 0})
    assert clean.startswith("client: not limited")
    assert "longest 218.8 ms, mostly user EmbedUser" in clean
    assert "no request's timing was affected (every read carries the kernel's receive time)" in clean
    touched = client_line(ClientRun(2.0), stalls, {"requests": 283, "coalesced": 4, "clock_in_stall": 7})
    assert "7 of 283 requests timed on arrival" in touched and "late by up to 219 ms" in touched
    assert "4 of 283 requests read several events at once" in touched and "no request's timing" not in touched


def test_a_clock_stamped_request_in_flight_during_a_stall_is_counted():
    from time import perf_counter

    from llmload.health.sampler import ClientHealth
    from llmload.metrics.record import RequestMeta, RequestRecord

    health = ClientHealth()
    now = perf_counter()
    health.stalls.recent.append((now - 1.0, now - 0.9))  # one stall of 100 ms, a second ago

    def rec(t0: float, clock: bool, coalesced: int = 0) -> RequestRecord:
        return RequestRecord(meta=RequestMeta(request_id="r", scenario="chat", start_time=0.0), status="ok",
                             t0=t0, e2e_ms=500.0, clock_stamped=clock, coalesced_reads=coalesced)

    health.finished(rec(now - 1.2, clock=True))   # in flight across the stall, timed by the clock: late
    health.finished(rec(now - 1.2, clock=False))  # kernel stamps: the stall moved none of its times
    health.finished(rec(now - 0.5, clock=True))   # after the stall
    health.finished(rec(now - 3.0, clock=False, coalesced=2))
    assert health.timing == {"requests": 4, "coalesced": 1, "clock_in_stall": 1}


# -- item 11: the dashboard's badge and the summary: one function, the same intervals ------------
def test_the_live_verdict_and_the_summary_agree_over_the_same_intervals():
    history, live, view = LiveHistory(started=1000.0), LiveWindow(), ClientView()
    texts = []
    for i, sample in enumerate([OK_SAMPLE, BUSY_MACHINE, BUSY_MACHINE, OK_SAMPLE, OK_SAMPLE]):
        view.add("local", judged(sample), {}, 0)
        history.sample(live, 1002.0 + 2 * i, 2.0, 4, {}, view.state()[1])
        texts.append(client_line(history.client, view.stalls, view.timing))
    # after the client recovered the badge still says what the summary will: 2 limited intervals
    assert texts[-1].startswith("CLIENT-LIMITED") and "in 2 intervals of 2 s (last at 0:06" in texts[-1]
    assert not history.latest()[-1]["client_limited"]  # ... and the newest sample itself is ok
    rows = [row()]
    summary = end_of_run_text(rows, {}, history, "", 2.0, [], None, clients=view)
    assert texts[-1] in summary


def test_a_workers_sample_seen_at_two_history_samples_is_one_interval():
    history, live, view = LiveHistory(started=1000.0), LiveWindow(), ClientView()
    view.add("w1", judged(BUSY_MACHINE), {}, 0)  # a worker reports every 3 s, the history samples every 2 s
    history.sample(live, 1002.0, 4.0, 4, {}, view.state()[1])
    history.sample(live, 1004.0, 4.0, 4, {}, view.state()[1])  # the same sample again: not a new interval
    assert len(history.limited_intervals) == 1 and history.limited_causes == {"machine": 1}
    view.add("w1", judged(BUSY_MACHINE), {}, 0)
    history.sample(live, 1006.0, 4.0, 4, {}, view.state()[1])
    assert len(history.limited_intervals) == 2


def test_describe_without_the_action_keeps_the_reason():
    s = judged({**OK_SAMPLE, "cpu": 97.0})
    assert describe(s).endswith(ACTION["process"])
    assert describe(s, action=False).endswith("this process is busy (CPU 97 % of a core)")


def test_every_named_llmload_job_is_a_module_that_exists():
    """A module moved (the house restructure) would name its stalls by function again: each key must import."""
    import importlib.util

    from llmload.health.stall_names import LLMLOAD_WORK

    assert [m for m in LLMLOAD_WORK if importlib.util.find_spec(m) is None] == []
