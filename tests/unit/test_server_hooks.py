"""Server hooks (issue 22): when the profiler of ``--profile-step`` starts and stops, the options'
checks, a hook call's manifest entry, and the mock's prefix cache emptied by a reset."""

from __future__ import annotations

import types

import pytest

from llmload.mock.engine.prefix_cache import PrefixCache, prompt_block_hashes
from llmload.plugin.options.option_checks import ConfigError
from llmload.plugin.run.profile_clock import START, STOP, ProfileClock
from llmload.plugin.run.server_hooks import hook_settings, report_warmup_s
from llmload.server_metrics.engine_admin import HookCall, reset_cache


def _env(**opts) -> types.SimpleNamespace:
    base = {"reset_cache": "", "profile_step": "", "profile_options": ""}
    return types.SimpleNamespace(parsed_options=types.SimpleNamespace(**{**base, **opts}), shape_class=None)


def _drive(clock: ProfileClock, timeline: list[tuple[float, object, bool]]) -> list[tuple[float, str]]:
    out = []
    for now, level, measuring in timeline:
        action = clock.observe(now, level, measuring)
        if action is not None:
            out.append((now, action))
    return out


def test_the_profiler_runs_around_the_chosen_steps_window():
    clock = ProfileClock(step=2, warmup_s=5.0)  # lead 1 s, grace 1 s
    timeline = [(t / 10, (4 if t < 100 else 8 if t < 200 else 16, None), True) for t in range(0, 300)]
    # step 2 begins at 10.0 s; its window opens at 15.0: start at 14.0; the level changes at 20.0: stop at 21.0
    assert _drive(clock, timeline) == [(14.0, START), (21.0, STOP)]
    assert clock.window_opens == 15.0 and clock.why_not() == ""
    assert clock.ended(30.0) is None  # already stopped


def test_the_last_step_stops_when_the_run_ends_and_the_warmup_is_not_a_step():
    clock = ProfileClock(step=1, warmup_s=2.0)
    timeline = [(float(t), (64 if t < 10 else 4, None), t >= 10) for t in range(0, 20)]  # warm-up: 64 users
    assert _drive(clock, timeline) == [(11.0, START)]  # step 1 begins when the warm-up ends (10 s): 10 + 2 - 1
    assert clock.ended(20.0) == STOP and clock.ended(21.0) is None


def test_a_change_of_the_arrival_rate_is_a_step():
    clock = ProfileClock(step=2, warmup_s=0.0, lead_s=1.0, grace_s=0.0)
    timeline = [(float(t), (8, 2.0 if t < 5 else 4.0), True) for t in range(10)]
    assert _drive(clock, timeline) == [(5.0, START)]  # never before the step itself begins


def test_a_step_that_never_comes_or_ends_in_its_warmup_says_why():
    short = ProfileClock(step=3, warmup_s=5.0)
    _drive(short, [(float(t), (4 if t < 5 else 8, None), True) for t in range(10)])
    assert short.ended(10.0) is None and "2 step(s), so step 3 never came" in short.why_not()
    brief = ProfileClock(step=2, warmup_s=5.0)
    _drive(brief, [(float(t), (4 if t < 5 else 8 if t < 7 else 16, None), True) for t in range(12)])
    assert not brief.started and "ended within its 5-s warm-up" in brief.why_not()
    with pytest.raises(ValueError):
        ProfileClock(step=0, warmup_s=5.0)


def test_hook_options_are_checked_with_the_flag_named():
    assert hook_settings(_env()).reset is None
    s = hook_settings(_env(reset_cache="sglang", profile_step="2", profile_options='{"activities": ["GPU"]}'))
    assert (s.reset, s.profile_step, s.profile_options) == ("sglang", 2, {"activities": ["GPU"]})
    for opts, message in (({"reset_cache": "trt"}, "--reset-cache 'trt': expected one of vllm, sglang, auto"),
                          ({"profile_step": "0"}, "--profile-step '0': expected a step number >= 1"),
                          ({"profile_step": "two"}, "--profile-step 'two'"),
                          ({"profile_step": "1", "profile_options": "[1]"}, "--profile-options '[1]': expected a JSON"),
                          ({"profile_options": "{}"}, "--profile-options needs --profile-step N")):
        with pytest.raises(ConfigError) as e:
            hook_settings(_env(**opts))
        assert str(e.value).startswith(message), str(e.value)


def test_a_ramp_has_no_step_to_profile_and_the_window_uses_the_reports_warmup():
    from llmload.shapes.load_shapes import RampLoadShape, StepLoadShape

    class Ramp(RampLoadShape):
        pass

    env = _env(profile_step="1")
    env.shape_class = Ramp()
    with pytest.raises(ConfigError, match="a ramp has no steps"):
        hook_settings(env)

    class Steps(StepLoadShape):
        steps = (2, 4)
        step_seconds = 10
        warmup_s = 3.0

    env.shape_class = Steps()
    assert report_warmup_s(env) == 3.0  # what PREFIX_run.json says and the report uses
    assert report_warmup_s(_env()) == 5.0  # a plain run: the report's default


def test_a_hook_call_is_described_for_the_manifest():
    call = HookCall("start_profile", "POST", "/start_profile", 1700000000.12345, 0.5, 200, note="step 2")
    assert call.ok and call.describe() == {"hook": "start_profile", "method": "POST", "path": "/start_profile",
                                           "time": 1700000000.123, "seconds": 0.5, "http_status": 200, "ok": True,
                                           "error": None, "note": "step 2"}
    with pytest.raises(ValueError, match="unknown engine 'trt'"):
        reset_cache("http://127.0.0.1:1", "trt")


def test_the_mock_prefix_cache_forgets_everything_on_a_reset_but_keeps_its_counters():
    cache = PrefixCache(capacity_blocks=100)
    hashes = prompt_block_hashes([f"w{i}" for i in range(64)])
    cache.insert(hashes)
    assert cache.lookup(hashes, 64) == 63
    assert cache.clear() == 4 and len(cache) == 0
    assert cache.lookup(hashes, 64) == 0
    assert (cache.queried_tokens, cache.hit_tokens) == (128, 63)  # Prometheus counters never go back


def test_a_web_ui_tests_failing_reset_stops_that_test_and_is_named_in_its_manifest(monkeypatch, tmp_path):
    import json

    from llmload.plugin.run import server_hooks
    from llmload.plugin.run.server_hooks import ServerHooks
    from llmload.transport.connection import ClientOptions

    failed = HookCall("reset_cache", "POST", "/reset_prefix_cache", 1700000000.0, 0.01, 404, "POST "
                      "/reset_prefix_cache answered HTTP 404", engine="vllm")
    sent: list[tuple] = []
    monkeypatch.setattr(server_hooks, "reset_cache",
                        lambda host, engine, headers=None: sent.append((host, engine, headers)) or failed)
    stopped: list[str] = []
    manifest = types.SimpleNamespace(path=str(tmp_path / "run_run.json"), data={"run_id": "r"})
    env = _env(reset_cache="vllm")
    env.host, env.user_classes, env.process_exit_code = "http://127.0.0.1:9", [], None
    plugin = types.SimpleNamespace(env=env, config=types.SimpleNamespace(client=ClientOptions(api_key="sk-1")),
                                   client_for=lambda host, client: client, run=types.SimpleNamespace(manifest=manifest),
                                   gate=types.SimpleNamespace(fail=stopped.append))
    ServerHooks(plugin).test_started()  # the web UI's start: the reset is made now, not at init
    assert len(stopped) == 1 and stopped[0].startswith("--reset-cache vllm: POST /reset_prefix_cache answered "
                                                       "HTTP 404 (vLLM serves it only with VLLM_SERVER_DEV_MODE=1)")
    assert "no load was sent" in stopped[0] and env.process_exit_code == 1
    assert sent == [("http://127.0.0.1:9", "vllm", {"Authorization": "Bearer sk-1"})]  # the run's key, its host
    (entry,) = json.loads((tmp_path / "run_run.json").read_text())["server_hooks"]
    assert (entry["hook"], entry["http_status"], entry["ok"], entry["engine"]) == ("reset_cache", 404, False, "vllm")
