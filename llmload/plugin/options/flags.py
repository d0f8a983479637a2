"""llmload's command-line options for Locust (each also an ``LLMLOAD_*`` environment variable), and
the API key.

The options are one table of topics (:data:`GROUPS`), so the argument groups, the environment
variables and the help text cannot drift apart. ``locust --help`` shows each topic as an argument
group, the common ones (workload, SLOs, shapes, warm-up) right after Locust's "Common options".
Values are checked once, at init (:mod:`llmload.plugin.run.config`), not by argparse, so every bad
value gets llmload's one-line message and exit code 1.

API keys come from ``OPENAI_API_KEY``/``LLMLOAD_API_KEY`` only: Locust shows custom options in
its page source and ships them to workers in clear (llmload keeps literal secret ``--header`` and
``--query`` values out of what is shipped: :mod:`llmload.plugin.options.shipped_options`).

Usage::

    add_arguments(parser)                    # Locust's init_command_line_parser hook
    option(environment, "request_timeout")   # 600.0, or what was given
"""

from __future__ import annotations

import os
from typing import Any

# The options by topic, in one table, so that the argument groups, the environment variables and the
# help cannot drift apart: (name, what the group holds, front, options). ``front``: --help shows the
# group right after Locust's "Common options"; the others come after Locust's own groups. Each
# option: (flag, keyword arguments of add_argument without env_var); env var = LLMLOAD_ + FLAG_IN_CAPS.
GROUPS: tuple[tuple[str, str, bool, tuple[tuple[str, dict[str, Any]], ...]], ...] = (
    ("workload", "what the users send", True, (
        ("--scenario", dict(default="", help="scenario name (or YAML file) the users run; overrides the locustfile's")),
        ("--model", dict(default="", help="model name to request (default: the first one the server's /v1/models "
                                          "lists)")),
        ("--endpoint", dict(default="", help="chat (/v1/chat/completions), completions (/v1/completions), "
                                             "responses (/v1/responses), messages (Anthropic's /v1/messages: the "
                                             "key in x-api-key, anthropic-version sent); audio only names "
                                             "LLMAudioUser's /v1/audio/transcriptions")),
        ("--input-tokens", dict(default="", help="prompt length in tokens: N or LOW-HIGH (overrides the scenario)")),
        ("--output-tokens", dict(default="", help="max_tokens: N or LOW-HIGH (overrides the scenario)")),
        ("--ignore-eos", dict(action="store_true", default=False,
                              help="send vLLM's ignore_eos so every reply is exactly max_tokens long")),
        ("--seed", dict(default="", help="workload seed (default: a fresh one per run, printed in the summary and "
                                         "PREFIX_run.json); the same seed sends the same prompts again")),
    )),
    ("SLOs", "the objectives the report, the shapes and the SLO stop judge", True, (
        ("--slo", dict(action="append", default=[], help="service-level objective [SCENARIO:]METRIC=VALUE, e.g. "
                                                         "ttft_p95_ms=2000 (repeatable)")),
        ("--slo-stop-after", dict(type=float, default=0.0, help="step shape: act when a step's verdict (as "
                                                                "llmload report judges it) stays broken this many "
                                                                "seconds (0: off)")),
        ("--slo-stop-action", dict(default="", help="stop: end the run (default); hold: go back to the last good step "
                                                    "and hold it")),
    )),
    ("shapes", "load shapes, for locustfiles with a shape class (locustfiles/steps.py, search.py, ui.py)", True, (
        ("--steps", dict(default="", help="step shape: user count of each step, e.g. 4,8,16,32 (locustfiles with a "
                                          "StepLoadShape)")),
        ("--step-seconds", dict(type=float, default=0.0, help="step shape: seconds each step lasts")),
        ("--step-spawn-rate", dict(type=float, default=0.0, help="step shape: users started per second when a step "
                                                                 "begins")),
        ("--step-precision", dict(type=float, default=0.0, metavar="PCT",
                                  help="step shape: end a step early once the 95 %% intervals of its SLO "
                                       "percentiles (else TTFT and TPOT p95) are within PCT %% of their values and "
                                       "the sample floor is met; --step-seconds stays the cap (0: off)")),
        ("--step-warmup-s", dict(type=float, default=0.0, help="step shape with --step-precision: seconds after each "
                                                               "change not judged (default: --search-warmup-s, 5)")),
        ("--step-sample-floor", dict(type=int, default=0, help="step shape with --step-precision: ok requests a step "
                                                               "needs before it may end early (default 30)")),
        ("--ramp-users", dict(type=int, default=0, help="ramp shape: users at the top of the ramp")),
        ("--ramp-seconds", dict(type=float, default=0.0, help="ramp shape: seconds to get there")),
        ("--ramp-hold-seconds", dict(type=float, default=0.0, help="ramp shape: seconds to stay at the top")),
        ("--rate-steps", dict(default="", help="rate ladder shape: arrival rates (requests/s) of open-loop workloads, "
                                               "e.g. 2,4,8")),
        ("--search", dict(default="", help="search shape: users (bisect the user count) or rate (the arrival rate of "
                                           "open-loop workloads) for the highest load that meets every SLO")),
        ("--search-min", dict(type=float, default=0.0, help="search shape: lowest load (users or requests/s)")),
        ("--search-max", dict(type=float, default=0.0, help="search shape: highest load (users or requests/s)")),
        ("--search-precision", dict(type=float, default=0.0, help="search shape: stop when the bracket is this narrow "
                                                                  "(users or requests/s)")),
        ("--search-warmup-s", dict(type=float, default=0.0, help="search shape and SLO stop: seconds after each change "
                                                                 "not judged (default 5, as llmload report)")),
    )),
    ("warm-up", "a phase before the shape or the plain run, left out of every verdict", True, (
        ("--warmup-seconds", dict(default="", help="a warm-up of this many seconds before the shape (or the plain "
                                                   "-u/-t run) starts its clock; its requests get phase=warmup and "
                                                   "are left out of the report, the SLO stop and the search")),
        ("--warmup-users", dict(default="", help="warm-up: users (closed loop) during --warmup-seconds")),
        ("--warmup-rate", dict(default="", help="warm-up: arrivals per second of open-loop workloads during "
                                                "--warmup-seconds (senders: --warmup-users, else the shape's or -u)")),
    )),
    ("isolation", "each priority class alone, then every class together", False, (
        ("--isolation", dict(action="store_true", default=False,
                             help="isolation run: each priority class (priority: in the scenario) alone for a phase, "
                                  "then every class together; rows get phase=alone:CLASS or together, and the report "
                                  "gives each class's p95s alone vs together (the leakage)")),
        ("--isolation-seconds", dict(default="", help="isolation run: seconds each phase lasts (default 30)")),
        ("--isolation-users", dict(default="", help="isolation run: users of the together phase, split over the "
                                                    "user classes by weight (largest remainder, at least one per "
                                                    "class); each user class runs the same users alone as together "
                                                    "(default: -u)")),
        ("--isolation-spawn-rate", dict(default="", help="isolation run: users started per second when a phase begins "
                                                         "(default 100)")),
    )),
    ("requests", "how requests are sent, timed out and retried", False, (
        ("--transport", dict(default="", help="fast: llmload's streaming client (default); openai: the official SDK")),
        ("--request-timeout", dict(default="600", help="seconds without an output event (after the first) before a "
                                                       "request times out (default 600)")),
        ("--first-token-timeout", dict(default="", help="seconds from sending to the first output event before a "
                                                        "request times out (default: --request-timeout)")),
        ("--request-deadline", dict(default="", help="seconds a whole request may take, from sending to its end, "
                                                     "before it times out (default: no limit)")),
        ("--max-event-bytes", dict(default="", help="longest SSE line or event accepted (default 1048576); longer ends "
                                                    "the request as protocol_error")),
        ("--backoff", dict(default="", help="on (default): after 429, 503 or an unreachable server a user waits "
                                            "(Retry-After, else exponential backoff with jitter); off: never waits")),
        ("--backoff-base-s", dict(default="", help="first backoff wait in seconds (default 0.5; doubles per failure "
                                                   "in a row)")),
        ("--backoff-max-s", dict(default="", help="longest backoff wait, Retry-After included (default 60)")),
        ("--preflight", dict(default="", help="check the server answers, and lists the models the run names, before "
                                              "the run: end (default: one message, exit code 1), wait (until it "
                                              "answers, up to --preflight-wait-s), off")),
        ("--preflight-wait-s", dict(default="", help="with --preflight wait: seconds to wait for the server "
                                                     "(default 300)")),
    )),
    ("connection", "headers, keys and TLS", False, (
        ("--header", dict(action="append", default=[], help="extra request header 'Name: value' (repeatable); a "
                                                            "value env:VAR is read from that environment variable, a "
                                                            "secret; a literal value of a secret-named header is never "
                                                            "sent to workers: give each worker the same --header")),
        ("--query", dict(action="append", default=[], help="query parameter NAME=VALUE on every request, e.g. "
                                                           "api-version=2024-10-21 (repeatable); a secret-named one's "
                                                           "value is never sent to workers, as for --header")),
        ("--api-key-header", dict(default="", help="send the API key in this header instead of 'Authorization: Bearer' "
                                                   "(x-api-key for --endpoint messages), e.g. api-key (Azure)")),
        ("--ca-bundle", dict(default="", help="CA certificates (PEM) to verify an https server with (a worker uses its "
                                              "own, never the master's)")),
        ("--insecure", dict(action="store_true", default=False, help="do not verify the https server's certificate")),
        ("--affinity-headers", dict(action="store_true", default=False,
                                    help="send X-Llmload-Session-Id (the session, else the shared prefix) and "
                                         "X-Llmload-Prefix-Id on every request that has one, for a router that pins "
                                         "sessions or prefixes to replicas (llmload sweep's fleets turn it on)")),
        ("--allow-key-to-any-host", dict(action="store_true", default=False,
                                         help="send the API key and secret headers to a host changed after launch (by "
                                              "the web UI); by default they go only to the launch's --host")),
    )),
    ("server", "the server's and the GPUs' own metrics, and hooks into the server", False, (
        ("--server-metrics", dict(action="append", default=[], metavar="URL",
                                  help="read the server's Prometheus metrics from URL during the run (repeatable, e.g. "
                                       "every replica behind a load balancer; default: the target host's /metrics when "
                                       "it answers)")),
        ("--no-server-metrics", dict(action="store_true", default=False,
                                     help="do not read the server's Prometheus metrics")),
        ("--server-metrics-interval", dict(default="2", metavar="S",
                                           help="seconds between two reads of the server's metrics and the GPUs' "
                                                "(default 2)")),
        ("--gpu-metrics", dict(action="append", default=[], metavar="URL",
                               help="read GPU telemetry from a DCGM exporter's /metrics at URL during the run "
                                    "(repeatable, one per node, e.g. http://gpu-node:9400/metrics; nvml: this "
                                    "machine's GPUs, needs the gpu extra; default: none)")),
        ("--reset-cache", dict(default="", help="empty the server's prefix cache before the run: vllm (POST "
                                                "/reset_prefix_cache), sglang (POST /flush_cache) or auto (told from "
                                                "its /metrics); a reset that fails ends the run before any load")),
        ("--profile-step", dict(default="", metavar="N", help="run the server's profiler (POST /start_profile, "
                                                              "/stop_profile) around the measured window of step N "
                                                              "(the Nth load level after the warm-up; 1 for a plain "
                                                              "-u/-t run), from the master only")),
        ("--profile-options", dict(default="", metavar="JSON", help="the body of /start_profile with --profile-step: "
                                                                    "SGLang's options, e.g. '{\"activities\": "
                                                                    "[\"GPU\"]}' (vLLM reads none: it takes them at "
                                                                    "launch)")),
    )),
    ("tracing", "OpenTelemetry: trace context and span export", False, (
        ("--trace-context", dict(action="store_true", default=False,
                                 help="send a W3C traceparent header (a new trace id per request, sampled) on every "
                                      "request and write its trace id into the row (trace_id), to join server traces")),
        ("--otlp-endpoint", dict(default="", metavar="URL", help="export every request as an OpenTelemetry span "
                                                                 "over OTLP/HTTP to URL, e.g. http://collector:4318 "
                                                                 "(needs the otel extra)")),
        ("--otlp-header", dict(action="append", default=[], metavar="NAME=VALUE",
                               help="header on every OTLP export (repeatable); a secret-named one as NAME=env:VAR")),
    )),
    ("client", "the load generator itself, and distributed runs", False, (
        ("--calibration", dict(default="", help="the JSON `llmload calibrate` wrote (default: ~/.cache/llmload/"
                                                "calibration.json when it is this host's); the client-limited verdict "
                                                "uses it; a worker uses its own, never the master's")),
        ("--verbose", dict(action="store_true", default=False,
                           help="end a headless run with the client's details: every client-limited interval, the "
                                "event-loop stalls by length, CPU and cause, the garbage collector (also in "
                                "PREFIX_run.json's client, with --csv)")),
        ("--master-lost-after", dict(default="", help="workers: seconds without a heartbeat from the master before "
                                                      "a worker stops, keeps its rows on its own disk and exits "
                                                      "(default 20)")),
        ("--cluster-token", dict(default="", help="master: take rows only from workers that present this token; "
                                                  "workers: present it (set it on every host, e.g. as "
                                                  "LLMLOAD_CLUSTER_TOKEN; never sent to workers by the master)")),
    )),
)
OPTIONS: tuple[tuple[str, dict[str, Any]], ...] = tuple(o for *_, options in GROUPS for o in options)
"""Every option, group by group."""


def env_var(flag: str) -> str:
    return "LLMLOAD_" + flag.lstrip("-").replace("-", "_").upper()


# The web UI's start form shows these, in this order and under these headings (Locust's form has no
# headings: the group opens each field's help); every other option is set on the command line only,
# among them everything that names a file (plugin.options.web_form keeps those at their launch values).
FORM: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("workload", ("--scenario", "--model", "--endpoint", "--input-tokens", "--output-tokens", "--ignore-eos",
                  "--seed")),
    ("SLOs", ("--slo-stop-after", "--slo-stop-action")),
    ("shapes", ("--steps", "--step-seconds", "--step-spawn-rate", "--ramp-users", "--ramp-seconds",
                "--ramp-hold-seconds", "--rate-steps", "--search", "--search-min", "--search-max",
                "--search-precision", "--search-warmup-s")),
    ("server", ("--no-server-metrics",)),
)
FORM_GROUP = {flag: group for group, flags in FORM for flag in flags}


def form_dests() -> frozenset[str]:
    """The argparse names of the options the start form shows."""
    return frozenset(flag.lstrip("-").replace("-", "_") for flag in FORM_GROUP)


class FormHelp(str):
    """A help text that the web UI's start form shows after its group (``[shapes] seconds each step
    lasts``) and ``--help`` without it, under the group's heading. Locust's form has no headings
    and shows ``action.help`` as it is; argparse prints ``action.help % params``, which this answers
    with the text alone."""

    def __new__(cls, group: str, text: str) -> FormHelp:
        tagged = super().__new__(cls, f"[{group}] {text}")
        tagged.text = text
        return tagged

    def __mod__(self, params: Any) -> str:
        return self.text % params


def add_arguments(parser: Any) -> None:
    """Add llmload's options to Locust's parser, one argument group per topic (the front ones right
    after Locust's "Common options"); the form's fields are added first, in its order, because
    Locust's form lists the fields in the order they were added."""
    groups = {name: parser.add_argument_group(f"llmload: {name}", about + (
        " (every llmload option is also an LLMLOAD_* environment variable)" if i == 0 else ""))
        for i, (name, about, _front, _options) in enumerate(GROUPS)}
    group_of = {flag: name for name, *_, options in GROUPS for flag, _ in options}
    table = dict(OPTIONS)
    for flag in [f for _, flags in FORM for f in flags] + [f for f, _ in OPTIONS if f not in FORM_GROUP]:
        kwargs = dict(table[flag])
        shown = flag in FORM_GROUP
        if shown:
            kwargs["help"] = FormHelp(FORM_GROUP[flag], kwargs["help"])
        action = groups[group_of[flag]].add_argument(flag, env_var=env_var(flag), **kwargs)
        # What Locust's own add_argument marks (a group's does not): whether the field shows in the
        # web UI's start form.
        action.include_in_web_ui = shown
        action.is_secret = action.is_required = action.is_multiple = False
    # argparse prints its groups in the order of this list, and a group's options in the order of
    # its own list (no public way to place either): each group in the table's order; the common
    # topics right after Locust's "Common options", the rest before its "User classes".
    rank = {flag: i for i, (flag, _) in enumerate(OPTIONS)}
    for group in groups.values():
        group._group_actions.sort(key=lambda a: rank[a.option_strings[0]])
    order = parser._action_groups
    mine = [groups[name] for name, *_ in GROUPS]
    order[:] = [g for g in order if g not in mine]
    at = order.index(parser._optionals) + 1 if parser._optionals in order else len(order)
    order[at:at] = [groups[name] for name, _, front, _ in GROUPS if front]
    end = next((i for i, g in enumerate(order) if g.title == "User classes"), len(order))
    order[end:end] = [groups[name] for name, _, front, _ in GROUPS if not front]


def option(environment: Any, name: str, default: Any = None) -> Any:
    """An option's value (``name`` as argparse stores it: ``request_timeout``), or ``default``
    when it was not given (None, empty text or an empty list)."""
    opts = getattr(environment, "parsed_options", None)
    value = getattr(opts, name, None) if opts is not None else None
    return default if value in (None, "", []) else value


def api_key_from_env() -> str | None:
    return os.environ.get("LLMLOAD_API_KEY") or os.environ.get("OPENAI_API_KEY") or None
