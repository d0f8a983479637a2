"""A start from the web UI changes only the form's fields (issue 19, row 3)."""

from __future__ import annotations

from llmload.plugin.options.web_form import FormGuard


def test_file_and_hidden_options_go_back_to_their_launch_values():
    launch = {"num_users": 1, "host": "http://a:8000", "csv_prefix": "runs/chat", "calibration": "",
              "server_metrics_interval": "2", "input_tokens": "", "scenario": "chat"}
    guard = FormGuard(launch, form_keys={"input_tokens", "scenario", "calibration"})
    posted = dict(launch, num_users=16, input_tokens="200-400", csv_prefix="/etc/passwd",
                  calibration="/dev/zero", server_metrics_interval="1e-6", scenario="rag")
    warnings = guard.restore(posted)
    assert posted["num_users"] == 16 and posted["input_tokens"] == "200-400" and posted["scenario"] == "rag"
    assert posted["csv_prefix"] == "runs/chat" and posted["calibration"] == ""
    assert posted["server_metrics_interval"] == "2"
    assert len(warnings) == 3 and all(w.startswith("web UI: the start asked to change") for w in warnings)
    assert any("csv_prefix (names a file)" in w for w in warnings)


def test_a_scenario_path_from_the_form_is_refused_but_a_name_is_not():
    guard = FormGuard({"scenario": "chat"}, form_keys={"scenario"})
    posted = {"scenario": "../../etc/shadow.yaml"}
    assert guard.restore(posted) and posted["scenario"] == "chat"
    posted = {"scenario": "rag"}
    assert not guard.restore(posted) and posted["scenario"] == "rag"


def test_the_form_shows_the_grouped_fields_and_nothing_that_names_a_file():
    from locust.argument_parser import LocustArgumentParser

    from llmload.plugin.options.flags import FORM, add_arguments, form_dests
    from llmload.plugin.options.web_form import FILE_OPTIONS

    parser = LocustArgumentParser()
    add_arguments(parser)
    shown = [k for k in parser.args_included_in_web_ui if k != "help"]  # Locust marks its own -h
    assert set(shown) == set(form_dests())
    assert not set(shown) & (FILE_OPTIONS | {"header", "query", "api_key_header", "insecure", "slo"})
    assert shown[:2] == ["scenario", "model"]  # the form's order is the table's, by group
    for group, flags in FORM:
        for flag in flags:
            action = parser.args_included_in_web_ui[flag.lstrip("-").replace("-", "_")]
            assert action.help.startswith(f"[{group}] ")
