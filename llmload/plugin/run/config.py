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
from llmload.plugin.run.user_setup import UserSetup, user_setup
from llmload.shapes.schedules import STOP_ACTIONS, parse_rates, parse_steps
from llmload.shapes.search import MODES
from llmload.shapes.warmup import WarmupPlan, parse_warmup
from llmload.transport import ClientOptions
from llmload.workload.file.scenario import ScenarioSpec
from llmload.workload.trace.read import TraceError
from llmload.workload.trace.replay import selected_trace

log = logging.getLogger("llmload")


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
    applied_shape: str | None = None  # the llmload shape the options ask for, the locustfile having none (option_scope)

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
            setup = self.setups[user_class] = user_setup(self.environment, user_class)
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
