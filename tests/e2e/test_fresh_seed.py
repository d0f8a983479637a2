"""Repeated runs send new prompts unless --seed says otherwise (issue 25, item 2): a prefix-caching
server must not answer the second of two identical runs from its cache."""

from __future__ import annotations

import json

import pandas as pd

from tests.support.locust_runs import CHAT, run_locust

ARGS = ["--headless", "-u", "4", "-r", "4", "-t", "3s", "--input-tokens", "300", "--output-tokens", "8",
        "--stop-timeout", "5"]


def _run(mock, tmp_path, name, *extra):
    prefix = tmp_path / name
    res = run_locust(["-f", CHAT, "--host", mock.url, "--csv", str(prefix), *ARGS, *extra], tmp_path)
    assert res.returncode == 0, res.stderr[-3000:]
    rows = pd.read_csv(f"{prefix}_requests.csv")
    ok = rows[rows["status"] == "ok"]
    hit = ok["cached_tokens"].fillna(0).sum() / ok["prompt_tokens"].sum()
    return json.loads((tmp_path / f"{name}_run.json").read_text())["seed"], hit, res.stdout


def test_two_runs_send_different_prompts_and_a_given_seed_repeats_them(mock_factory, tmp_path):
    mock = mock_factory()  # the default profile caches prefixes, as vLLM does by default
    seed_a, hit_a, out_a = _run(mock, tmp_path, "a")
    seed_b, hit_b, out_b = _run(mock, tmp_path, "b")
    assert seed_a != seed_b
    assert hit_b < 0.2, hit_b  # new prompts: the first run's cache does not answer the second
    assert f"workload seed {seed_a} (--seed {seed_a}" in out_a
    _, hit_c, out_c = _run(mock, tmp_path, "c", "--seed", str(seed_a))
    assert hit_c > 0.5, hit_c  # the same prompts again: the server's cache answers them
    assert "shares no prefix" in out_c


PINNED = """
seed: 7
workloads:
  chat:
    input_tokens: 300
    output_tokens: 8
    ignore_eos: true
"""


def test_a_scenario_files_seed_pins_its_prompts_and_seed_overrides_it(mock_factory, tmp_path):
    """A file's seed: makes every run of it send the same prompts, as docs/scenarios.md says (issue
    32, item 13: the file's seed was mixed with a fresh one, so it pinned nothing, and the run printed
    another seed); --seed N still wins."""
    scen = tmp_path / "pinned.yaml"
    scen.write_text(PINNED)
    mock = mock_factory()
    _, hit_a, out_a = _run(mock, tmp_path, "a", "--scenario", str(scen))
    _, hit_b, out_b = _run(mock, tmp_path, "b", "--scenario", str(scen))
    assert hit_a < 0.2 and hit_b > 0.5, (hit_a, hit_b)  # the second run sent the first one's prompts
    assert "seed 7 from the file's seed:" in out_a and "workload seed" not in out_a, out_a[-2000:]
    manifest = json.loads((tmp_path / "b_run.json").read_text())
    assert list(manifest["scenario_seeds"].values()) == [7]
    _, hit_c, out_c = _run(mock, tmp_path, "c", "--scenario", str(scen), "--seed", "12345")
    assert hit_c < 0.2 and "workload seed 12345 (--seed 12345" in out_c  # --seed overrides the file's
