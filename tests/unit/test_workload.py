"""Workloads: distributions, prefix groups, sessions, datasets, text, arrivals and every validation error."""

from __future__ import annotations

import glob
import json
import os
import random
import statistics

import pytest

from llmload.workload.arrival import ArrivalGate
from llmload.workload.dataset import load_dataset
from llmload.workload.distributions import SpecError, parse_distribution
from llmload.workload.file.scenario import ScenarioError, load_scenario, parse_scenario
from llmload.workload.scenario_workload import PrefixPool, ScenarioWorkload
from llmload.workload.text import WORDS, TextSource
from tests.support.processes import ROOT

N = 40_000


def draws(spec, integer=True, n=N):
    d = parse_distribution(spec, "x", integer=integer)
    rng = random.Random(3)
    return d, [d.sample(rng) for _ in range(n)]


@pytest.mark.parametrize("spec,mean,std", [
    (128, 128, 0),
    ("100-200", 150, None),
    ({"dist": "uniform", "min": 10, "max": 20}, 15, 3.162),
    ({"dist": "normal", "mean": 500, "std": 100}, 500, 100),
    ({"dist": "lognormal", "median": 300, "sigma": 0.5}, 300 * 2.718281828 ** (0.5**2 / 2), None),
    ({"dist": "lognormal", "mean": 400, "sigma": 0.3}, 400, None),
    ({"dist": "empirical", "values": [100, 200, 400], "weights": [1, 2, 1]}, 225, None),
    ({"dist": "histogram", "bins": [[0, 100, 3], [100, 1000, 1]]}, 0.75 * 50 + 0.25 * 550, None),
])
def test_distribution_moments(spec, mean, std):
    d, xs = draws(spec)
    assert statistics.fmean(xs) == pytest.approx(mean, rel=0.02, abs=0.6)
    assert d.mean == pytest.approx(mean, rel=0.02, abs=0.6)
    if std == 0:
        assert set(xs) == {128}
    elif std is not None and isinstance(spec, dict):
        assert statistics.pstdev(xs) == pytest.approx(std, rel=0.05)
    assert all(isinstance(x, int) for x in xs[:100])


def test_clipping_and_float_times():
    _, xs = draws({"dist": "normal", "mean": 10, "std": 50, "min": 5, "max": 20})
    assert min(xs) == 5 and max(xs) == 20
    _, ts = draws({"dist": "uniform", "min": 0.5, "max": 1.5}, integer=False)
    assert min(ts) >= 0.5 and max(ts) <= 1.5 and any(t != round(t) for t in ts)
    _, xs = draws({"dist": "empirical", "values": [7]})
    assert set(xs) == {7}


@pytest.mark.parametrize("spec,msg", [
    (-1, "expected a number >= 0"), ("20-10", "LOW <= HIGH"), ("abc", "N or"), (True, "expected a number"),
    ({"dist": "nope"}, "expected one of"), ({"dist": "normal", "mean": 1}, "std: missing"),
    ({"dist": "normal", "mean": 1, "std": -2}, ">= 0"), ({"dist": "uniform", "min": 5}, "max: missing"),
    ({"dist": "normal", "mean": 1, "std": 1, "min": 10, "max": 5}, "below min"),
    ({"dist": "lognormal", "sigma": 1}, "exactly one of median or mean"),
    ({"dist": "empirical", "values": []}, "non-empty list"),
    ({"dist": "empirical", "values": [1, 2], "weights": [1]}, "2 weights"),
    ({"dist": "histogram", "bins": [[5, 1, 1]]}, "low <= high"),
    ({"dist": "fixed", "value": 3, "extra": 1}, "unknown key"),
])
def test_distribution_errors(spec, msg):
    with pytest.raises(SpecError, match=msg):
        parse_distribution(spec, "workloads.x.input_tokens")


def make_groups(text: str):
    return parse_scenario(text).workloads[0]


RAG = """
seed: 11
workloads:
  rag:
    input_tokens: 50
    output_tokens: 8
    prefix:
      groups:
        - {name: docs, tokens: 300, count: 10, popularity: zipf, zipf_s: 1.0, weight: 3}
        - {name: faq, tokens: 40, count: 2}
"""


def test_prefix_groups_share_exact_bytes_and_follow_zipf():
    spec = make_groups(RAG)
    a, b = PrefixPool(spec.prefix_groups, 11, "rag"), PrefixPool(spec.prefix_groups, 11, "rag")
    assert a.text(0, 3) == b.text(0, 3)  # two processes build the same prefix
    assert a.text(0, 3) != a.text(0, 4) and a.text(0, 3).split()[0] == "docs3"
    assert len(a.text(0, 3).split()) == 300 and len(a.text(1, 0).split()) == 40
    assert PrefixPool(spec.prefix_groups, 12, "rag").text(0, 3) != a.text(0, 3)  # another seed, other text
    rng = random.Random(5)
    picks = [a.pick(rng) for _ in range(20_000)]
    docs = [i for g, i, _ in picks if g.name == "docs"]
    assert len(docs) / len(picks) == pytest.approx(0.75, abs=0.02)
    harmonic = sum(1 / (i + 1) for i in range(10))
    assert docs.count(0) / len(docs) == pytest.approx(1 / harmonic, abs=0.02)
    assert docs.count(9) / len(docs) == pytest.approx(0.1 / harmonic, abs=0.01)
    # expected hit ratio: 0.75 × 288/350 + 0.25 × 32/90
    assert spec.expected_prefix_hit_ratio() == pytest.approx(0.75 * 288 / 350 + 0.25 * 32 / 90)


def test_requests_carry_the_prefix_and_a_unique_question():
    spec = make_groups(RAG)
    w = ScenarioWorkload(spec, 11, user_seed=1, model="m", text=TextSource(1))
    reqs = [w.next_request() for _ in range(50)]
    for r in reqs:
        system, user = r.messages
        assert system["role"] == "system" and user["role"] == "user"
        assert len(user["content"].split()) == 50
        assert r.input_tokens == len(system["content"].split()) + 50 and r.max_tokens == 8
    firsts = [r.messages[1]["content"].split()[0] for r in reqs]
    assert len(set(firsts)) == 50  # every question starts differently


SESSION = """
workloads:
  conv:
    system_prompt: "be brief"
    input_tokens: 20
    output_tokens: 10
    session: {turns: 3, think_time_s: {dist: uniform, min: 1.0, max: 2.0}}
"""


def test_session_history_carries_the_actual_replies():
    spec = parse_scenario(SESSION).workloads[0]
    w = ScenarioWorkload(spec, 0, user_seed=2, model="m", text=TextSource(2))
    r1 = w.next_request()
    assert r1.turn == 1 and r1.session_id and r1.want_text and r1.wait_s == 0
    assert [m["role"] for m in r1.messages] == ["system", "user"]
    w.on_reply(r1, "first real reply", ok=True)
    r2 = w.next_request()
    assert r2.turn == 2 and r2.session_id == r1.session_id and 1.0 <= r2.wait_s <= 2.0
    assert [m["content"] for m in r2.messages[:3]] == ["be brief", r1.messages[1]["content"], "first real reply"]
    assert r2.input_tokens == 2 + 20 + 3 + 20
    w.on_reply(r2, "second", ok=True)
    r3 = w.next_request()
    assert r3.turn == 3 and not r3.want_text and len(r3.messages) == 6
    w.on_reply(r3, "", ok=True)
    r4 = w.next_request()
    assert r4.turn == 1 and r4.session_id != r1.session_id
    w.on_reply(r4, "", ok=False)  # a failed turn ends its session
    assert w.next_request().turn == 1


def test_sharegpt_dataset_replays_every_turn(tmp_path):
    data = [{"conversations": [{"from": "system", "value": "sys"},
                               {"from": "human", "value": "hi there"}, {"from": "gpt", "value": "a b c d"},
                               {"from": "human", "value": "and more"}, {"from": "gpt", "value": "x y"}]},
            {"conversations": [{"from": "human", "value": " ".join(["w"] * 50)}, {"from": "gpt", "value": "k"}]}]
    (tmp_path / "d.json").write_text(json.dumps(data))
    spec = parse_scenario("workloads:\n  sg:\n    dataset: {path: d.json, max_input_tokens: 10}\n",
                          str(tmp_path / "s.yaml"), str(tmp_path)).workloads[0]
    convs = load_dataset(spec.dataset)
    assert len(convs) == 1 and len(convs[0].turns) == 2 and convs[0].system == "sys"
    assert convs[0].turns[0].reply_words == 4
    w = ScenarioWorkload(spec, 0, 1, "m", TextSource(1), conversations=convs)
    r1 = w.next_request()
    assert r1.messages == [{"role": "system", "content": "sys"}, {"role": "user", "content": "hi there"}]
    assert r1.max_tokens == 4  # the dataset's reply length
    w.on_reply(r1, "the real reply", ok=True)
    r2 = w.next_request()
    assert r2.messages[-3:] == [{"role": "user", "content": "hi there"},
                                {"role": "assistant", "content": "the real reply"},
                                {"role": "user", "content": "and more"}]
    first = parse_scenario("workloads:\n  sg:\n    dataset: {path: d.json, turns: first}\n", "s", str(tmp_path))
    convs = load_dataset(first.workloads[0].dataset)
    assert convs and all(len(c.turns) == 1 for c in convs)


def test_jsonl_dataset(tmp_path):
    spec = load_scenario("scenarios/mixed.yaml")  # relative dataset paths resolve next to the file
    assert spec.workload("sharegpt").dataset.path.endswith("scenarios/data/sharegpt_sample.json")
    jl = parse_scenario("workloads:\n  p:\n    dataset: data/prompts.jsonl\n", "s", "scenarios").workloads[0]
    convs = load_dataset(jl.dataset)
    assert len(convs) == 10 and convs[1].turns[0].reply_words == 33 and convs[0].system == "Be brief."
    (tmp_path / "bad.jsonl").write_text('{"prompt": "ok"}\n{"nope": 1}\n')
    bad = parse_scenario("workloads:\n  p:\n    dataset: bad.jsonl\n", "s", str(tmp_path)).workloads[0]
    with pytest.raises(ScenarioError, match="bad.jsonl:2: expected an object"):
        load_dataset(bad.dataset)


@pytest.mark.parametrize("text,msg", [
    ("workloads:\n  a:\n    input_tokenz: 5\n", r"s.yaml:3: workloads.a.input_tokenz: unknown key"),
    ("workloads:\n  a:\n    prefix:\n      groups:\n        - {tokens: 10, count: -3}\n",
     r"s.yaml:5: workloads.a.prefix.groups\[0\].count: expected a whole number >= 1, got -3"),
    ("workloads:\n  a:\n    input_tokens: {dist: uniform, min: 9, max: 3}\n",
     r"s.yaml:3: workloads.a.input_tokens.max: max 3 is below min 9"),
    ("workloads:\n  a:\n    dataset: missing.json\n", r"s.yaml:3: workloads.a.dataset.path: no such file"),
    ("workloads:\n  a:\n    endpoint: embedding\n", r"workloads.a.endpoint: expected chat or completions"),
    ("workloads:\n  a:\n    weight: 0\n", r"workloads.a.weight: expected a number > 0"),
    ("workloads:\n  a:\n    session: {turns: 2}\n    arrival: {rate: 3}\n", r"do not mix"),
    ("workloads:\n  a:\n    arrival: {mode: open}\n", r"arrival.rate: missing"),
    ("workloads:\n  a:\n    slo: {ttft_p95: 3}\n", r"workloads.a.slo.ttft_p95: unknown metric"),
    ("workloads:\n  a:\n    prefix: {count: 3}\n", r"workloads.a.prefix.tokens: missing"),
    ("workloads: []\n", r"s.yaml:1: workloads: expected a mapping of one or more named workloads"),
    ("seed: -1\nworkloads: {a: {}}\n", r"seed: expected a whole number >= 0"),
    ("workloads:\n  a: {ignore_eos: maybe}\n", r"ignore_eos: expected true or false"),
    ("nonsense: 1\nworkloads: {a: {}}\n", r"s.yaml:1: nonsense: unknown key"),
    ("workloads: {a: [1, 2}\n", r"s.yaml:1: not valid YAML"),
    ("", r"the file is empty"),
])
def test_validation_errors_name_file_line_and_key(tmp_path, text, msg):
    with pytest.raises(ScenarioError, match=msg):
        parse_scenario(text, "s.yaml", str(tmp_path))


def test_every_shipped_scenario_loads():
    paths = sorted(glob.glob(os.path.join(ROOT, "scenarios", "*.yaml")))
    assert len(paths) >= 6
    for path in paths:
        spec = load_scenario(path)
        assert spec.workloads and all(w.input_tokens is not None or w.dataset is not None or w.trace is not None
                                      for w in spec.workloads)
    with pytest.raises(ScenarioError, match="cannot read"):
        load_scenario("scenarios/none.yaml")


def test_text_source_exact_lengths_and_long_prompts():
    src = TextSource(4, corpus_words=1000)
    rng = random.Random(1)
    for n in (1, 2, 17, 999, 1000, 1001, 40_000):
        t = src.text(rng, n, tag="tag7")
        assert len(t.split()) == n and t.split()[0] == "tag7"
        assert "  " not in t
    assert set(src.span(rng, 5000).split()) <= set(WORDS)


def test_tokenizer_gives_exact_token_counts(tmp_path):
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers.models import WordLevel
    from tokenizers.pre_tokenizers import Whitespace

    from llmload.workload.text import TokenizedTextSource

    vocab = {w: i for i, w in enumerate(WORDS)} | {"[UNK]": len(WORDS)}
    tok = tokenizers.Tokenizer(WordLevel(vocab, unk_token="[UNK]"))
    tok.pre_tokenizer = Whitespace()
    path = tmp_path / "tokenizer.json"
    tok.save(str(path))
    src = TokenizedTextSource(1, str(path))
    rng = random.Random(2)
    for n in (5, 100, 777):
        assert src.count(src.text(rng, n, tag="q-1")) == n  # "q-1" is 3 tokens here: the fit makes up for it


def test_tokenizer_gives_exact_counts_where_a_word_is_several_tokens(tmp_path):
    """A small byte-level BPE trained on other text (as the tiny vLLM model's, scripts/vllm_server.py):
    an English word is 2-3 tokens, so sizing by words alone overshoots ~3x (128 asked, ~350 sent)."""
    tokenizers = pytest.importorskip("tokenizers")
    from tokenizers import decoders, models, pre_tokenizers, trainers

    from llmload.workload.text import TokenizedTextSource

    rng0 = random.Random(0)
    syllables = [a + b for a in "bcdfgklmnprstvz" for b in "aeiou"]
    text = [" ".join("".join(rng0.choice(syllables) for _ in range(rng0.randint(1, 3))) for _ in range(50))
            for _ in range(300)]
    tok = tokenizers.Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator(text, trainers.BpeTrainer(vocab_size=600, show_progress=False,
                                                      initial_alphabet=pre_tokenizers.ByteLevel.alphabet()))
    path = tmp_path / "bpe.json"
    tok.save(str(path))
    src = TokenizedTextSource(1, str(path))
    assert src.count(" ".join(WORDS[:100])) > 200  # several tokens a word
    rng = random.Random(2)
    for n in (1, 7, 128, 500):
        for _ in range(5):
            assert src.count(src.text(rng, n, tag="q-1")) == n


def test_open_loop_gaps_have_the_rate_and_burstiness():
    for shape in (1.0, 0.25):
        gate = ArrivalGate(lambda: 10.0, shape, seed=3)
        gaps = [gate.next_gap() for _ in range(N)]
        assert statistics.fmean(gaps) == pytest.approx(0.1, rel=0.03)
        cv2 = statistics.pvariance(gaps) / statistics.fmean(gaps) ** 2
        assert cv2 == pytest.approx(1 / shape, rel=0.1)  # gamma: squared coefficient of variation = 1/shape


def test_users_from_scenario_makes_weighted_classes():
    import subprocess
    import sys

    # In a child: importing Locust monkey-patches the whole process.
    code = ("from llmload.plugin.users.from_scenario import users_from_scenario, integer_weights\n"
            "c = users_from_scenario('scenarios/mixed.yaml')\n"
            "print({n: k.weight for n, k in c.items()}, c['RagUser'].workload, c['RagUser'].abstract,\n"
            "      integer_weights([0.5, 1.25, 2]))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "{'ChatUser': 5, 'RagUser': 3, 'SharegptUser': 2} rag False [2, 5, 8]"


def test_each_turn_says_how_much_of_its_prompt_was_sent_before_by_design():
    """Issue 32, item 2: the cached share a session makes possible is its history (and a fixed system
    prompt every request sends), counted as the mock counts prompt tokens."""
    spec = parse_scenario(SESSION).workloads[0]
    w = ScenarioWorkload(spec, 0, user_seed=2, model="m", text=TextSource(2))
    r1 = w.next_request()
    assert r1.resent_tokens == 2  # "be brief": every session sends it
    w.on_reply(r1, "first real reply", ok=True)
    r2 = w.next_request()
    assert r2.resent_tokens == 2 + 20 + 3 and r2.input_tokens - r2.resent_tokens == 20  # only the new message
    w.on_reply(r2, "second", ok=True)
    assert w.next_request().resent_tokens == 2 + 20 + 3 + 20 + 1
    single = parse_scenario("workloads:\n  one:\n    input_tokens: 20\n    output_tokens: 5\n").workloads[0]
    assert ScenarioWorkload(single, 0, 1, "m", TextSource(1)).next_request().resent_tokens is None
