"""Write the tables of docs/ that the code owns, so the pages cannot drift from it.

The tables are generated between marker lines in the Markdown; the prose around them is written
by hand. Sources: the package and room arrows (``MAY_IMPORT``, ``ROOM_MAY_IMPORT`` in
``tests/unit/test_structure.py``, read as text, not imported), the endpoint registry
(``llmload.wire.endpoints.ENDPOINTS``), the Locust plugin's option table
(``llmload.plugin.options.flags.GROUPS``), the
``llmload`` command's parser (``llmload.cli.build_parser``) and the request CSV's columns
(``llmload.metrics.record.CSV_COLUMNS``, each explained in ``COLUMN_MEANINGS`` below: a new column
without a meaning here fails ``--check``) and the history CSV's (``llmload.plugin.output.run_files.HISTORY_COLUMNS``).

Usage::

    python scripts/doc_tables.py          # rewrite the tables in docs/
    python scripts/doc_tables.py --check  # exit 1 when a table in docs/ is not what the code says
"""

from __future__ import annotations

import argparse
import ast
import os
import re
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from llmload.cli import build_parser  # noqa: E402
from llmload.metrics.record import CSV_COLUMNS  # noqa: E402
from llmload.plugin.options.flags import GROUPS, env_var  # noqa: E402
from llmload.plugin.output.run_files import HISTORY_COLUMNS  # noqa: E402
from llmload.wire.endpoints import ENDPOINTS  # noqa: E402

# What each column of PREFIX_requests.csv holds (docs/files.md). Keep in CSV_COLUMNS order.
COLUMN_MEANINGS = {
    "request_id": "the request's id (`w<worker index><8 hex>-<n>`: never read as a number), also sent "
                  "as the `X-Request-Id` header",
    "start_time": "Unix epoch seconds at t0 (when the request was written)",
    "scenario": "the scenario (workload) name",
    "status": "one of the statuses in [Metrics](metrics.md#status-of-a-request)",
    "http_status": "the response's HTTP status (empty when none came)",
    "ttft_ms": "time to first token: t0 → first output-carrying event",
    "ttft_visible_ms": "t0 → first non-empty `content`/`text`",
    "tpot_ms": "(E2E − TTFT) / (output tokens − 1), for output tokens ≥ 2",
    "e2e_ms": "t0 → end of stream (or the moment the request failed)",
    "itl_max_ms": "the worst gap between two output events that can be known",
    "prompt_tokens": "`usage.prompt_tokens` as the server reported it",
    "cached_tokens": "`usage.prompt_tokens_details.cached_tokens`, when reported",
    "completion_tokens": "`usage.completion_tokens`, else the count of output-carrying chunks",
    "max_tokens": "the `max_tokens` the request asked for",
    "token_source": "`usage` or `chunks`: where `completion_tokens` came from",
    "finish_reason": "the stream's `finish_reason`",
    "users": "the total user count when the request started (distributed: this worker's exact count + "
             "the others' last reported counts)",
    "worker": "the worker index (0 in a local run)",
    "session_id": "the conversation, agent task or RAG pipeline task the request belongs to",
    "turn": "the turn (or agent step, or pipeline step) within the session",
    "error": "what went wrong, for a request that is not `ok`",
    "scheduled_time": "when an open-loop arrival or a trace entry was due (Unix seconds)",
    "requested_input_tokens": "the prompt length (text) the workload asked for, to hold against `prompt_tokens`",
    "arrival_rate": "the run's target arrival rate (req/s) when the request was scheduled (a trace: its mean rate)",
    "run_id": "the run's id, as in `PREFIX_run.json`",
    "coalesced_reads": "reads that carried several output events (their gaps are left out of ITL)",
    "step_kind": "an agent call's kind: `task` (the first call) or `tool_result`; a RAG pipeline's call: "
                 "`embed`, `rerank` or `chat`",
    "requested_image_tokens": "what the request's pictures cost a Qwen2-VL-style model",
    "backoff_ms": "how long the user waited after this request (429, 503 or an unreachable server)",
    "call_id": "call-graph sessions (`session: {kind: graph}`): this call's id in its session's graph",
    "call_after": "call-graph sessions: the ids of the calls this one waited for, joined by `+` (empty: the first)",
    "trace_id": "`--trace-context`: the W3C trace id (32 hex digits) of the `traceparent` header the request carried",
    "phase": "`warmup`: the request started in the run's `--warmup-seconds` warm-up, which the report, the SLO "
             "stop and the search leave out; `alone:CLASS` or `together`: the `--isolation` phase it started in "
             "([Priority classes](priority.md#-isolation)); empty otherwise",
    "inputs": "embeddings: how many inputs the request's batch had; rerank and score: the query-document "
              "pairs (empty for the streaming endpoints)",
    "model": "the model the request named, when its scenario mixes models (`models:`); empty: the run's "
             "`--model`",
    "priority": "the request's priority class (`priority:` in its scenario); empty when it has none",
    "audio_seconds": "audio transcription: the length of the audio the request sent, in seconds",
    "resent_input_tokens": "of `requested_input_tokens`, what the workload sent before by design and a prefix cache "
                           "may serve: a session's history, a call-graph call's shared head or first parent's turn, "
                           "an agent's loop so far and its tools, a fixed `system_prompt` (empty: nothing)",
}

PAGES = {name: os.path.join(ROOT, "docs", f"{name}.md") for name in ("options", "files", "architecture", "endpoints")}
STRUCTURE_TEST = os.path.join(ROOT, "tests", "unit", "test_structure.py")


def cell(text: str) -> str:
    """Text that stays one Markdown table cell (a pipe inside a code span does not split it)."""
    return text.replace("%%", "%").replace("|", "\\|").replace("\n", " ")  # argparse help doubles its %


def plugin_table() -> str:
    """One table per topic, in --help's groups and order (``llmload: workload``, ...)."""
    lines: list[str] = []
    for name, about, _front, options in GROUPS:
        lines += ["" if lines else None, f"**llmload: {name}**: {about}", "",
                  "| option | environment variable | default | meaning |", "|---|---|---|---|"]
        for flag, kwargs in options:
            default = kwargs.get("default")
            shown = "" if default in ("", [], None, False, 0, 0.0) else f"`{default}`"
            lines.append(f"| `{flag}` | `{env_var(flag)}` | {shown} | {cell(kwargs.get('help', ''))} |")
    return "\n".join(line for line in lines if line is not None)


def subcommand_table(parser: argparse.ArgumentParser) -> str:
    lines = ["| argument | default | meaning |", "|---|---|---|"]
    for action in parser._actions:  # argparse has no public iterator over a parser's arguments
        if isinstance(action, argparse._HelpAction):
            continue
        if action.option_strings:
            name = ", ".join(action.option_strings)
            if isinstance(action, argparse.BooleanOptionalAction):
                name = " / ".join(action.option_strings)
        else:
            name = action.metavar or action.dest
        if action.metavar and action.option_strings:
            name += f" {action.metavar}"
        default = action.default
        shown = "" if default in (None, "", [], False, argparse.SUPPRESS) else f"`{default}`"
        help_text = action.help or ("engine parameter: overrides the profile's" if action.option_strings else "")
        lines.append(f"| `{name}` | {shown} | {cell(help_text)} |")
    return "\n".join(lines)


def command_tables() -> dict[str, str]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return {f"llmload-{name}": subcommand_table(p) for name, p in sub.choices.items()}


def columns_table() -> str:
    missing = [c for c in CSV_COLUMNS if c not in COLUMN_MEANINGS]
    if missing:
        raise SystemExit(f"scripts/doc_tables.py: COLUMN_MEANINGS: no meaning for CSV column(s) {missing}; add them")
    lines = ["| # | column | meaning |", "|---|---|---|"]
    lines += [f"| {i} | `{c}` | {COLUMN_MEANINGS[c]} |" for i, c in enumerate(CSV_COLUMNS, 1)]
    return "\n".join(lines)


def history_columns() -> str:
    return "`" + ",".join(HISTORY_COLUMNS) + "`"


def structure_table(name: str = "MAY_IMPORT") -> dict:
    """A table of the structure test (``MAY_IMPORT``, ``ROOM_MAY_IMPORT``), the one truth about the arrows."""
    with open(STRUCTURE_TEST, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    for node in tree.body:
        if isinstance(node, ast.AnnAssign | ast.Assign):
            targets = [node.target] if isinstance(node, ast.AnnAssign) else node.targets
            if any(isinstance(t, ast.Name) and t.id == name for t in targets):
                return ast.literal_eval(node.value)
    raise SystemExit(f"{os.path.relpath(STRUCTURE_TEST, ROOT)}: no {name} table; the arrows tables need it")


def may_import() -> dict[str, set[str]]:
    return structure_table("MAY_IMPORT")


def rooms_table() -> str:
    lines = ["| room | may import of its package's other rooms |", "|---|---|"]
    for pkg, rooms in structure_table("ROOM_MAY_IMPORT").items():
        for room, allowed in rooms.items():
            here = f"`{pkg}/{room}/`" if room else f"`{pkg}/` (its own modules)"
            shown = ", ".join(f"`{r}`" if r else f"`{pkg}/` (its own modules)" for r in sorted(allowed)) or "nothing"
            lines.append(f"| {here} | {shown} |")
    return "\n".join(lines)


def endpoints_table() -> str:
    """The endpoint registry (``llmload.wire.endpoints.ENDPOINTS``), one row an endpoint."""
    lines = ["| endpoint | path | answers | what it is | span operation | scenario keys | its own columns | "
             "metrics | mock faults |", "|---|---|---|---|---|---|---|---|---|"]
    for e in ENDPOINTS:
        keys = ", ".join(f"`{k}`" for k in e.keys) or "–"
        fields = ", ".join(f"`{f}`" for f in e.row_fields) or "–"
        faults = ", ".join(f"`{f}`" for f in e.faults) or "–"
        metrics = ", ".join(f"`{m}`" for m in e.metrics)
        lines.append(f"| `{e.name}` | `{e.path}` | {e.answer} | {cell(e.description)} | `{e.operation}` | {keys} | "
                     f"{fields} | {metrics} | {faults} |")
    return "\n".join(lines)


def arrows_table() -> str:
    def name(pkg: str) -> str:
        return "`llmload` (`__init__`)" if pkg == "__init__" else f"`{pkg}`"

    lines = ["| package | may import of llmload |", "|---|---|"]
    for pkg, allowed in may_import().items():
        shown = ", ".join(name(a) for a in sorted(allowed, key=lambda a: (a == "__init__", a))) or "nothing"
        lines.append(f"| {name(pkg)} | {shown} |")
    return "\n".join(lines)


def tables() -> dict[str, dict[str, str]]:
    return {"options": {"plugin-options": plugin_table(), **command_tables()},
            "files": {"requests-columns": columns_table(), "history-columns": history_columns()},
            "architecture": {"package-arrows": arrows_table(), "room-arrows": rooms_table()},
            "endpoints": {"endpoints": endpoints_table()}}


def filled(text: str, name: str, table: str, page: str) -> str:
    pattern = re.compile(rf"(<!-- table:{name} -->\n).*?(<!-- /table:{name} -->)", re.S)
    if not pattern.search(text):
        raise SystemExit(f"{page}: no <!-- table:{name} --> ... <!-- /table:{name} --> markers; add them")
    return pattern.sub(lambda m: m.group(1) + table + "\n" + m.group(2), text)


def main(argv: list[str] | None = None) -> int:
    args = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    args.add_argument("--check", action="store_true", help="only check; exit 1 when a table is stale")
    check = args.parse_args(argv).check
    stale = []
    for page_name, page_tables in tables().items():
        page = PAGES[page_name]
        with open(page, encoding="utf-8") as f:
            text = f.read()
        new = text
        for name, table in page_tables.items():
            new = filled(new, name, table, os.path.relpath(page, ROOT))
        if new != text:
            stale.append(os.path.relpath(page, ROOT))
            if not check:
                with open(page, "w", encoding="utf-8") as f:
                    f.write(new)
    if check and stale:
        print(f"stale tables in {', '.join(stale)}: run `python scripts/doc_tables.py`", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
