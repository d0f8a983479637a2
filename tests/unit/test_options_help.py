"""`locust --help` by topic (issue 32, item 15): llmload's options in argument groups, the common ones
right after Locust's "Common options", each option next to its kin, no form tags in the help."""

from __future__ import annotations

import re

from locust import argument_parser

from llmload.plugin.options.flags import GROUPS, OPTIONS, add_arguments


def locust_help() -> tuple[str, object]:
    parser = argument_parser.get_empty_argument_parser()
    argument_parser.setup_parser_arguments(parser)
    add_arguments(parser)
    return parser.format_help(), parser


def test_llmloads_common_groups_come_right_after_locusts_common_options():
    text, _ = locust_help()
    lines = text.splitlines()
    heads = [line[:-1] for line in lines if line and not line.startswith(" ") and line.endswith(":")]
    assert heads[:5] == ["Common options", "llmload: workload", "llmload: SLOs", "llmload: shapes", "llmload: warm-up"]
    assert heads.index("Web UI options") == 5 and heads[heads.index("Examples") - 1] == "User classes", heads
    assert {f"llmload: {name}" for name, *_ in GROUPS} <= set(heads)
    at = {flag: i for flag, _ in OPTIONS for i, line in enumerate(lines) if re.match(rf"\s+{flag}(\s|$)", line)}
    assert len(at) == len(OPTIONS)  # every option once
    # the issue: --steps at line ~230, its precision settings 70 lines further; --slo untagged; tags on 20 others
    assert at["--step-sample-floor"] - at["--steps"] < 40 and at["--slo"] < at["--steps"] < at["--request-timeout"]
    assert at["--scenario"] < 60, at["--scenario"]
    assert "[workload]" not in text and "[shapes]" not in text and "[SLOs]" not in text


def test_the_web_forms_fields_keep_their_group_in_front():
    _, parser = locust_help()
    shown = parser.args_included_in_web_ui
    assert str(shown["steps"].help).startswith("[shapes] step shape:")
    assert shown["scenario"].help.startswith("[workload]")
    mine = {flag.lstrip("-").replace("-", "_") for flag, _ in OPTIONS}
    assert [k for k in shown if k in mine][:2] == ["scenario", "model"]  # the form's order: the form's table
