"""What a run is configured to do, checked once: the server, each user class's workload source,
endpoint and transport, the length overrides, the SLOs, the scenario files and their ``shape:``.

Every mistake becomes one :class:`ConfigError` whose message names the option, file or class and
the fix; the plugin turns it into one line and exit code 1 at init, never a traceback per user.
Scenario paths are resolved one way everywhere (:func:`~llmload.workload.file.scenario.resolve_scenario_path`,
anchored at the user class's locustfile), so a locustfile run from another directory keeps its
scenario's SLOs, ``shape:`` and hit ratios.

Usage::

    config = build_config(environment, require_host=True)   # raises ConfigError
    setup = config.setup_for(ChatUser)                       # UserSetup: scenario, endpoint, transport, ...
    config.slos, config.shape, config.expected_hit_ratios()
    config.server_metrics.urls, config.server_metrics.interval_s
"""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from llmload.metrics.slo import SLO, parse_slo, scope_models
from llmload.plugin.options.flags import option
from llmload.plugin.options.option_checks import (
    ConfigError,
    FaultSettings,
    ServerMetricsSetup,
    client_options,
    fault_settings,
    seconds_option,
    server_metrics_setup,
)
from llmload.plugin.output.span_export import check_span_options
from llmload.plugin.run.isolation_setup import IsolationSetup, check_isolation
from llmload.plugin.run.server_hooks import hook_settings
from llmload.shapes.schedules import STOP_ACTIONS, parse_rates, parse_steps
from llmload.shapes.search import MODES
from llmload.shapes.warmup import WarmupPlan, parse_warmup
from llmload.transport import TRANSPORTS, ClientOptions
from llmload.wire.protocol import AUDIO_ENDPOINTS, BODY_ENDPOINTS, ENDPOINTS
from llmload.workload.distributions import Distribution, SpecError, parse_distribution
from llmload.workload.file.scenario import ScenarioSpec, is_scenario_file, load_scenario_cached, resolve_scenario_path
from llmload.workload.synthetic import LengthRange
from llmload.workload.trace.read import TraceError
from llmload.workload.trace.replay import selected_trace

log = logging.getLogger("llmload")


@dataclass(frozen=True)
class UserSetup:
    """How the users of one class run, as the command line and the class say together."""

    scenario_name: str  # rows' scenario for a synthetic workload; the file's path otherwise
    scenario: ScenarioSpec | None  # the scenario file, when there is one
    workload: str | None  # the class's chosen workload of a multi-workload file
    endpoint: str | None  # --endpoint, else None (the workload's or the class's own)
    class_endpoint: str
    transport: str
    input_lengths: LengthRange | None  # synthetic workloads
    output_lengths: LengthRange | None
    input_override: Distribution | None  # --input-tokens for scenario workloads
    output_override: Distribution | None
    ignore_eos: bool

    def endpoint_for(self, workload_endpoint: str | None) -> str:
        return self.endpoint or workload_endpoint or self.class_endpoint


class HitRatios(dict):
    """Workload → the prefix-cache hit ratio it allows; ``intended``: those it means to reach."""

    def __init__(self) -> None:
        super().__init__()
        self.intended: dict[str, float] = {}


@dataclass
class RunConfig:
    client: ClientOptions  # key, headers, query, TLS, deadlines, limits (a workload may add headers)
    slos: list[SLO]  # --slo, then each workload's slo: (scoped to it)
    scenarios: list[ScenarioSpec]
    setups: dict[type, UserSetup] = field(default_factory=dict)
    environment: Any = None
    server_metrics: ServerMetricsSetup = field(default_factory=ServerMetricsSetup)
    faults: FaultSettings = FaultSettings()
    warmup: WarmupPlan | None = None  # --warmup-seconds with --warmup-users or --warmup-rate
    isolation: IsolationSetup | None = None  # --isolation: the plan and the user classes of each priority class

    @property
    def shape(self) -> dict[str, Any]:
        """The ``shape:`` settings of the scenario file(s) in use (the first that has some)."""
        for spec in self.scenarios:
            if spec.shape:
                return spec.shape
        return {}

    def expected_hit_ratios(self) -> HitRatios:
        """Per workload: the hit ratio its scenario makes possible (0 when it shares nothing), and
        in ``.intended`` the ones a ``prefix_hit_rate`` sets."""
        out = HitRatios()
        for spec in self.scenarios:
            for w in spec.workloads:
                ratio = (w.expected_prefix_hit_ratio() if w.trace is None
                         else selected_trace(w.trace).expected_hit_ratio())
                if ratio is None and not (w.session or w.agent or w.dataset):
                    ratio = 0.0
                if ratio is not None:
                    out[w.name] = ratio
                if w.intended_hit_rate is not None:
                    out.intended[w.name] = w.intended_hit_rate
        return out

    def setup_for(self, user_class: type) -> UserSetup:
        """The class's setup (built on first use for a class not seen at init, e.g. picked in the UI)."""
        setup = self.setups.get(user_class)
        if setup is None:
            setup = self.setups[user_class] = _user_setup(self.environment, user_class)
            self._add_scenario(setup.scenario)
        return setup

    def _add_scenario(self, spec: ScenarioSpec | None) -> None:
        if spec is not None and all(s.path != spec.path for s in self.scenarios):
            _read_traces(spec)
            self.scenarios.append(spec)
            self.slos += [s for w in spec.workloads for s in w.slos]


def _read_traces(spec: ScenarioSpec) -> None:
    """Read each ``trace:`` now (once per process): a bad line ends the run at init, not per user."""
    for w in spec.workloads:
        if w.trace is None:
            continue
        fresh = w.trace not in _traces_seen
        try:
            trace = selected_trace(w.trace)
        except TraceError as e:
            raise ConfigError(f"{spec.path}: workloads.{w.name}.trace: {e}") from None
        if fresh:
            _traces_seen.add(w.trace)
            for note in trace.notes:
                log.warning("llmload: %s", note)


_traces_seen: set = set()


def class_anchor(user_class: type) -> str:
    """The file a user class was defined in (its locustfile), to find relative scenario paths."""
    module = sys.modules.get(user_class.__module__)
    return os.path.abspath(getattr(module, "__file__", "") or ".")


def _length(text: Any, what: str) -> LengthRange:
    try:
        return LengthRange.parse(text, what)
    except ValueError as e:
        raise ConfigError(str(e)) from None


def _override(environment: Any, key: str) -> Distribution | None:
    text = option(environment, key)
    if not text:
        return None
    flag = "--" + key.replace("_", "-")
    try:
        return parse_distribution(text, flag, minimum=1 if key == "output_tokens" else 0)
    except SpecError as e:
        raise ConfigError(str(e)) from None


def _user_setup(environment: Any, user_class: type) -> UserSetup:
    cls_name = user_class.__name__
    source = option(environment, "scenario") or getattr(user_class, "scenario", "chat")
    scenario = None
    workload = getattr(user_class, "workload", None)
    if is_scenario_file(source):
        path = resolve_scenario_path(str(source), class_anchor(user_class), *locustfiles(environment))
        try:
            scenario = load_scenario_cached(path)
        except ValueError as e:  # ScenarioError
            raise ConfigError(str(e)) from None
        if workload is not None:
            try:
                scenario.workload(workload)
            except ValueError as e:
                raise ConfigError(f"{cls_name}.workload: {e}") from None
    class_endpoint = getattr(user_class, "endpoint", "chat")
    if class_endpoint not in {**ENDPOINTS, **BODY_ENDPOINTS, **AUDIO_ENDPOINTS}:
        raise ConfigError(f"{cls_name}.endpoint {class_endpoint!r}: expected one of {', '.join(ENDPOINTS)} (or "
                          f"{', '.join(BODY_ENDPOINTS)} for LLMEmbeddingsUser and LLMRerankUser, audio for "
                          "LLMAudioUser)")
    endpoint = option(environment, "endpoint")
    if endpoint in AUDIO_ENDPOINTS:  # transcription is a user class of its own: --endpoint audio only names it
        if class_endpoint not in AUDIO_ENDPOINTS:
            raise ConfigError(f"--endpoint audio: {cls_name} sends {class_endpoint}; transcription runs in "
                              "LLMAudioUser (locust -f locustfiles/audio.py)")
        endpoint = None
    if endpoint is not None and endpoint not in ENDPOINTS:
        raise ConfigError(f"--endpoint {endpoint!r}: expected one of {', '.join(ENDPOINTS)}")
    transport = option(environment, "transport") or getattr(user_class, "transport_name", None) or "fast"
    if transport not in TRANSPORTS:
        where = "--transport" if option(environment, "transport") else f"{cls_name}.transport_name"
        raise ConfigError(f"{where} {transport!r}: expected one of {', '.join(TRANSPORTS)}")
    if transport == "openai" and (class_endpoint in BODY_ENDPOINTS or class_endpoint in AUDIO_ENDPOINTS):
        raise ConfigError(f"--transport openai: {cls_name} ({class_endpoint}) runs on the fast transport only; drop "
                          "--transport openai")
    if transport == "openai":
        used = {endpoint} if endpoint else ({w.endpoint for w in scenario.workloads} if scenario else {class_endpoint})
        if "messages" in used:
            raise ConfigError("--transport openai cannot send the Anthropic Messages API (endpoint messages): the "
                              "openai SDK has no /v1/messages; use --transport fast")
        whole = [w for w in scenario.workloads if w.endpoint in BODY_ENDPOINTS or w.pipeline] if scenario else []
        if whole:
            kind = "a pipeline" if whole[0].pipeline else f"endpoint {whole[0].endpoint}"
            raise ConfigError(f"--transport openai: workload {whole[0].name} ({kind}) sends whole-body requests on "
                              "the fast transport only; drop --transport openai")
    inp = option(environment, "input_tokens")
    out = option(environment, "output_tokens")
    synthetic = scenario is None
    return UserSetup(
        scenario_name=str(source),
        scenario=scenario,
        workload=workload,
        endpoint=endpoint,
        class_endpoint=class_endpoint,
        transport=transport,
        input_lengths=_length(inp or getattr(user_class, "input_tokens", 256),
                              "--input-tokens" if inp else f"{cls_name}.input_tokens") if synthetic else None,
        output_lengths=_length(out or getattr(user_class, "output_tokens", 128),
                               "--output-tokens" if out else f"{cls_name}.output_tokens") if synthetic else None,
        input_override=None if synthetic else _override(environment, "input_tokens"),
        output_override=None if synthetic else _override(environment, "output_tokens"),
        ignore_eos=bool(option(environment, "ignore_eos")) or bool(getattr(user_class, "ignore_eos", False)),
    )


def locustfiles(environment: Any) -> list[str]:
    text = option(environment, "locustfile") or ""
    return [p.strip() for p in str(text).split(",") if p.strip()]


def has_host(environment: Any, user_classes: list[type]) -> bool:
    return bool(environment.host) or all(getattr(c, "host", None) for c in user_classes)


def check_host(host: Any, where: str = "--host") -> None:
    """A server address must be a URL with its scheme: ``127.0.0.1:8000`` is not guessed at."""
    text = str(host)
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError for a port that is not a number
    except ValueError as e:
        raise ConfigError(f"{where} {text!r}: {e}; expected http(s)://HOST[:PORT][/base/path]") from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        hint = f", e.g. http://{text}" if "://" not in text else ""
        raise ConfigError(f"{where} {text!r}: expected a URL with its scheme, http(s)://HOST[:PORT][/base/path]"
                          f"{hint}")


def build_config(environment: Any, require_host: bool = False) -> RunConfig:
    """Check everything a run needs; raise ConfigError with the first problem."""
    classes = [c for c in (getattr(environment, "user_classes", None) or []) if getattr(c, "llmload_user", False)]
    if require_host and classes and not has_host(environment, classes):
        raise ConfigError("no server address: pass --host http://HOST:PORT (or set `host` on the user class)")
    if getattr(environment, "host", None):
        check_host(environment.host)
    for cls in classes:
        if getattr(cls, "host", None):
            check_host(cls.host, f"{cls.__name__}.host")
    slos = []
    for text in option(environment, "slo", []) or []:
        try:
            slos.append(parse_slo(text))
        except ValueError as e:
            raise ConfigError(str(e)) from None
    timeout = seconds_option(environment, "request_timeout", 600.0)
    config = RunConfig(client=client_options(environment, timeout), slos=slos, scenarios=[], environment=environment,
                       server_metrics=server_metrics_setup(environment), faults=fault_settings(environment))
    for cls in classes:
        config.setup_for(cls)
        check = getattr(cls, "check_settings", None)  # a user class's own settings (LLMAudioUser's clips)
        if check is not None:
            try:
                check()
            except ValueError as e:
                raise ConfigError(str(e)) from None
    workloads = [w for spec in config.scenarios for w in spec.workloads]
    try:  # --slo adapter-a:ttft_p95_ms=800: a model of a models: mix, judged over its requests alone
        config.slos = scope_models(config.slos, {w.name for w in workloads},
                                   {m for w in workloads if w.models for m in w.models.names})
    except ValueError as e:
        raise ConfigError(str(e)) from None
    _check_shape(environment, config.shape)
    config.warmup = _warmup(environment, config)
    hook_settings(environment)  # --reset-cache, --profile-step, --profile-options
    check_span_options(environment)  # --otlp-endpoint, --otlp-header
    config.isolation = check_isolation(environment, config)
    return config


def _warmup(environment: Any, config: RunConfig) -> WarmupPlan | None:
    try:
        plan = parse_warmup(*(option(environment, k) for k in ("warmup_seconds", "warmup_users", "warmup_rate")))
    except ValueError as e:
        raise ConfigError(str(e)) from None
    if plan is not None and plan.rate is not None and config.scenarios and \
            not any(w.arrival.mode == "open" for s in config.scenarios for w in s.workloads):
        raise ConfigError(f"--warmup-rate {plan.rate:g}: no workload is open-loop (arrival: in the scenario); "
                          "warm up closed-loop users with --warmup-users N instead")
    return plan


def _check_shape(environment: Any, shape: dict[str, Any]) -> None:
    """Shape settings from the command line, else the scenario's ``shape:``, as the shapes read them."""
    where_yaml = "the scenario's shape."
    for flag, key, parse in (("--steps", "steps", parse_steps), ("--rate-steps", "rate_steps", parse_rates)):
        value = option(environment, key.replace("-", "_"))
        where = flag
        if value is None and key in shape:
            value, where = shape[key], where_yaml + key
        if value is not None:
            try:
                parse(value, where)
            except ValueError as e:
                raise ConfigError(str(e)) from None
    search = option(environment, "search") or shape.get("search")
    if search is not None and search not in MODES:
        raise ConfigError(f"--search {search!r}: expected one of {', '.join(MODES)}")
    action = option(environment, "slo_stop_action") or shape.get("slo_stop_action")
    if action is not None and action not in STOP_ACTIONS:
        raise ConfigError(f"--slo-stop-action {action!r}: expected one of {', '.join(STOP_ACTIONS)}")
    for flag, key, yaml_key in (("--step-seconds", "step_seconds", "step_seconds"),
                                ("--step-spawn-rate", "step_spawn_rate", "spawn_rate"),
                                ("--slo-stop-after", "slo_stop_after", "slo_stop_after_s"),
                                ("--ramp-seconds", "ramp_seconds", "ramp_seconds"),
                                ("--ramp-hold-seconds", "ramp_hold_seconds", "ramp_hold_seconds"),
                                ("--ramp-users", "ramp_users", "ramp_users"),
                                ("--search-min", "search_min", "search_min"),
                                ("--search-max", "search_max", "search_max"),
                                ("--search-precision", "search_precision", "search_precision"),
                                ("--search-warmup-s", "search_warmup_s", "search_warmup_s"),
                                ("--step-precision", "step_precision", "step_precision"),
                                ("--step-warmup-s", "step_warmup_s", "step_warmup_s"),
                                ("--step-sample-floor", "step_sample_floor", "step_sample_floor")):
        value, where = option(environment, key), flag
        if value is None and yaml_key in shape:
            value, where = shape[yaml_key], where_yaml + yaml_key
        if value is not None and (isinstance(value, bool) or not isinstance(value, int | float) or value < 0):
            raise ConfigError(f"{where} {value!r}: expected a number >= 0")
    lo, hi = (option(environment, k) or shape.get(k) for k in ("search_min", "search_max"))
    if lo is not None and hi is not None and not float(hi) > float(lo):
        raise ConfigError(f"search shape: --search-max {hi!r} must be above --search-min {lo!r}")
