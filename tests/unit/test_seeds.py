"""One seed for a user class's requests (issue 32, item 13): --seed, else the scenario file's seed:,
else the run's fresh one; and the summary's line says which."""

from __future__ import annotations

from types import SimpleNamespace

from llmload.plugin.options.seeds import seed_line, workload_seed
from llmload.workload.file.scenario import parse_scenario

FILE = "workloads:\n  chat: {input_tokens: 10, output_tokens: 4}\n"


def test_a_files_seed_pins_unless_seed_is_given():
    pinned = parse_scenario("seed: 7\n" + FILE, "s/pinned.yaml")
    free = parse_scenario(FILE, "s/free.yaml")
    drawn = SimpleNamespace(seed="1690116979", seed_given=False)
    given = SimpleNamespace(seed="42", seed_given=True)
    assert free.seed is None and pinned.seed == 7
    assert workload_seed(drawn, pinned) == 7 and workload_seed(drawn, free) == 1690116979
    assert workload_seed(drawn, None) == 1690116979  # a user class without a file
    assert workload_seed(given, pinned) == 42 and workload_seed(given, free) == 42


def test_the_summary_says_which_seed_each_part_drew_from():
    pinned = parse_scenario("seed: 7\n" + FILE, "s/pinned.yaml")
    free = parse_scenario(FILE, "s/free.yaml")
    drawn = SimpleNamespace(seed="99", seed_given=False)
    assert seed_line(drawn, [free]) == "workload seed 99 (--seed 99 sends the same prompts again)"
    only = seed_line(drawn, [pinned])
    assert only.startswith("s/pinned.yaml: seed 7 from the file's seed:") and "workload seed" not in only
    both = seed_line(drawn, [pinned, None])
    assert both.startswith("workload seed 99") and "s/pinned.yaml: seed 7" in both
    given = seed_line(SimpleNamespace(seed="5", seed_given=True), [pinned])
    assert given == "workload seed 5 (--seed 5 sends the same prompts again)"
