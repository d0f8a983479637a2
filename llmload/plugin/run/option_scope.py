"""Options that only some load shape or user class reads (issue 32, item 1): each one is applied or
refused at init, never ignored without a word.

* A shape's options (``--steps``, ``--ramp-users``, ``--search``, ...) with a locustfile that has no
  shape: the one option that names a shape (``--steps``, ``--ramp-users``, ``--rate-steps``,
  ``--search``) makes llmload run that shape (:func:`shape_for`); the others need it too. With a
  locustfile that has shapes, an option none of them reads is refused, naming a locustfile that
  has the shape which reads it. ``--isolation`` runs its own phases: no shape option goes with it.
* An option that needs another (``--step-warmup-s`` and ``--step-sample-floor``: the precision
  stop; ``--slo-stop-action``: the SLO stop) is refused without it.
* ``--rate-steps`` and ``--search rate`` set the arrival rate of open-loop workloads: refused when
  no workload is open-loop.
* A user class's options (``--ignore-eos``, ``--output-tokens``, ``--input-tokens``, ``--scenario``,
  ``--endpoint``) are refused when no user class of the run reads them (an embeddings, rerank or
  audio locustfile).

The leading process checks (the master or the only one: shapes run there); a worker takes its
master's word. Pure but for Locust's shape classes, read from the environment.

Usage::

    kind = check_option_scope(environment, config)   # "step" | ... | None; raises ConfigError
    environment.shape_class = shape_for(kind)          # at init, when the locustfile has no shape
"""

from __future__ import annotations

import logging
from typing import Any

from llmload.plugin.options.flags import option
from llmload.plugin.options.option_checks import ConfigError
from llmload.shapes.load_shapes import RampLoadShape, RateLadderShape, StepLoadShape
from llmload.shapes.search_shape import SearchLoadShape
from llmload.wire import endpoints

log = logging.getLogger("llmload")

STEP, RAMP, RATE, SEARCH = "step", "ramp", "rate", "search"
SHAPES: dict[str, type] = {STEP: StepLoadShape, RAMP: RampLoadShape, RATE: RateLadderShape, SEARCH: SearchLoadShape}
NAMED = {STEP: "step shape", RAMP: "ramp shape", RATE: "rate ladder", SEARCH: "search shape"}
HAS_IT = {STEP: "locustfiles/steps.py", RAMP: "locustfiles/ui.py (its Ramp, with --class-picker)",
          RATE: "locustfiles/rate_ladder.py", SEARCH: "locustfiles/search.py"}
ASKS = {"steps": STEP, "ramp_users": RAMP, "rate_steps": RATE, "search": SEARCH}
"""The option that names a shape: given with a locustfile that has none, llmload runs that shape."""

READ_BY: dict[str, tuple[str, ...]] = {  # argparse name → the shapes that read it
    "steps": (STEP,), "step_seconds": (STEP, RATE), "step_spawn_rate": (STEP, SEARCH),
    "step_precision": (STEP,), "step_warmup_s": (STEP,), "step_sample_floor": (STEP,),
    "slo_stop_after": (STEP,), "slo_stop_action": (STEP,),
    "ramp_users": (RAMP,), "ramp_seconds": (RAMP,), "ramp_hold_seconds": (RAMP,),
    "rate_steps": (RATE,),
    "search": (SEARCH,), "search_min": (SEARCH,), "search_max": (SEARCH,), "search_precision": (SEARCH,),
    "search_warmup_s": (STEP, SEARCH),
}
NEEDS = {"step_warmup_s": ("step_precision", "the precision stop"),
         "step_sample_floor": ("step_precision", "the precision stop"),
         "slo_stop_action": ("slo_stop_after", "the SLO stop")}
"""An option that works only beside another: (that one, what the pair is)."""

CLASS_OPTIONS = ("scenario", "endpoint", "input_tokens", "output_tokens", "ignore_eos")
"""A user class's options. LLMUser (chat, completions, responses, messages) reads every one; the
others only what :data:`OTHERS_READ` lists (``--endpoint audio`` only names LLMAudioUser, and
:mod:`llmload.plugin.run.config` checks that)."""
OTHERS_READ = {"embeddings": {"input_tokens", "scenario name"}, "audio": {"scenario name"}}
"""By endpoint: LLMEmbeddingsUser's --input-tokens is each input's length, and a --scenario that is
not a file names its rows; LLMRerankUser (rerank, score) reads none of them."""


def flag(dest: str) -> str:
    return "--" + dest.replace("_", "-")


def given(environment: Any, dest: str) -> Any:
    """The option's value when it was given (a 0 of a number option is its "not given" default)."""
    value = option(environment, dest)
    return None if value is None or value is False or (not isinstance(value, bool) and value == 0) else value


def kind_of(shape: Any) -> str | None:
    """Which of llmload's shapes it is (None: a LoadTestShape of the locustfile's own)."""
    shape = getattr(shape, "inner", shape)  # the warm-up in front of a shape
    return next((k for k, cls in SHAPES.items() if isinstance(shape, cls)), None)


def locustfile_shapes(environment: Any) -> list[Any]:
    shapes = list((getattr(environment, "available_shape_classes", None) or {}).values())
    own = getattr(environment, "shape_class", None)
    return shapes or ([own] if own is not None else [])


def _said(dest: str, value: Any) -> str:
    if value is True:
        return flag(dest)
    return f"{flag(dest)} {value:g}" if isinstance(value, float) else f"{flag(dest)} {value}"


def shape_for(kind: str) -> Any:
    """A shape of ``kind`` for a locustfile that has none; its settings come from the options."""
    base = SHAPES[kind]
    return type(base.__name__, (base,), {"abstract": False, "__module__": __name__})()


def install_applied_shape(environment: Any, kind: str | None, scenario_shape: dict[str, Any] | None = None) -> None:
    """At init, where shapes run: the shape the options asked for, said in one line (and that
    ``-u``/``-r`` no longer apply, as Locust says for a locustfile's own shape). Without one, a
    scenario's ``shape:`` settings are unused: said once too."""
    if getattr(environment, "shape_class", None) is not None:
        return
    if kind is None:
        if scenario_shape:
            log.warning("llmload: the scenario's shape: settings (%s) are read by a load shape, and the run has none: "
                        "they are not used (pass --steps, --ramp-users, --rate-steps or --search for one)",
                        ", ".join(scenario_shape))
        return
    environment.shape_class = shape_for(kind)
    environment.shape_class.runner = environment.runner
    asked = next(d for d, k in ASKS.items() if k == kind)
    opts = environment.parsed_options
    common = [f for f, d in (("-u", "num_users"), ("-r", "spawn_rate")) if getattr(opts, d, None)]
    log.warning("llmload: %s: the locustfile has no load shape, so llmload runs its %s (%s) with the options "
                "given%s", _said(asked, given(environment, asked)), NAMED[kind], SHAPES[kind].__name__,
                f"; {' and '.join(common)} {'do' if len(common) > 1 else 'does'} not apply to it" if common else "")


def check_option_scope(environment: Any, config: Any) -> str | None:
    """Raise ConfigError for an option no shape or user class of the run reads; the shape to run
    when the options ask for one and the locustfile has none (else None)."""
    _check_class_options(environment)
    asked = {d: v for d in READ_BY if (v := given(environment, d)) is not None}
    for d, (need, what) in NEEDS.items():
        if d in asked and need not in asked and not _set_elsewhere(environment, config, need):
            raise ConfigError(f"{_said(d, asked[d])} needs {flag(need)}: it sets {what}, which is off without it")
    if not asked:
        return None
    if config.isolation is not None:
        d = next(iter(asked))
        raise ConfigError(f"{_said(d, asked[d])}: --isolation runs its own phases, which no load shape option "
                          "changes; drop it, or run without --isolation")
    shapes = locustfile_shapes(environment)
    if shapes:
        kinds = {k for s in shapes if (k := kind_of(s))}
        for d, v in asked.items():
            if not kinds & set(READ_BY[d]):
                names = ", ".join(f"{type(getattr(s, 'inner', s)).__name__}" for s in shapes)
                theirs = " and ".join(NAMED[k] for k in READ_BY[d])
                raise ConfigError(f"{_said(d, v)}: the locustfile's load shape ({names}) does not read it; it is read "
                                  f"by the {theirs} (as in {HAS_IT[READ_BY[d][0]]}): drop it, or run such a locustfile")
        _check_open_loop(asked, config)
        return None
    kinds = list(dict.fromkeys(ASKS[d] for d in asked if d in ASKS))  # in READ_BY's order, as the message
    if len(kinds) > 1:
        two = [d for d in ASKS if d in asked]
        raise ConfigError(f"{' and '.join(_said(d, asked[d]) for d in two)} ask for two load shapes (the "
                          f"{' and the '.join(NAMED[k] for k in kinds)}); give the options of one")
    if not kinds:
        d = next(iter(asked))
        k = READ_BY[d][0]
        starter = next(a for a, kk in ASKS.items() if kk == k)
        raise ConfigError(f"{_said(d, asked[d])}: the locustfile has no load shape, and this option alone starts none: "
                          f"add {flag(starter)} (the {NAMED[k]}), or run a locustfile that has one ({HAS_IT[k]})")
    kind = kinds[0]
    for d, v in asked.items():
        if kind not in READ_BY[d]:
            raise ConfigError(f"{_said(d, v)}: the {NAMED[kind]} that {flag(next(a for a in ASKS if a in asked))} "
                              f"asks for does not read it; drop it")
    _check_open_loop(asked, config)
    return kind


def _set_elsewhere(environment: Any, config: Any, dest: str) -> bool:
    """The precision or SLO stop turned on by the scenario's ``shape:`` or the locustfile's shape class."""
    yaml_key, attr = {"step_precision": ("step_precision", "step_precision"),
                      "slo_stop_after": ("slo_stop_after_s", "slo_stop_after_s")}[dest]
    return bool(config.shape.get(yaml_key)) or any(getattr(getattr(s, "inner", s), attr, 0)
                                                   for s in locustfile_shapes(environment))


def _check_open_loop(asked: dict[str, Any], config: Any) -> None:
    """The rate ladder and a rate search set the arrival rate of open-loop workloads: there must be one."""
    rate = [d for d in ("rate_steps", "search") if d in asked and (d != "search" or asked[d] == "rate")]
    if rate and not any(w.arrival.mode == "open" for s in config.scenarios for w in s.workloads):
        raise ConfigError(f"{_said(rate[0], asked[rate[0]])}: it sets the arrival rate of open-loop workloads, and no "
                          "workload of this run is open-loop (arrival: {mode: open} in its scenario, as "
                          "scenarios/open_loop.yaml)")


def _check_class_options(environment: Any) -> None:
    from llmload.workload.file.scenario import is_scenario_file

    classes = [c for c in (getattr(environment, "user_classes", None) or []) if getattr(c, "llmload_user", False)]
    kinds = {c: getattr(c, "endpoint", "chat") for c in classes}
    whole, upload = endpoints.names(endpoints.BODY), endpoints.names(endpoints.UPLOAD)
    if not classes or any(e not in whole and e not in upload for e in kinds.values()):
        return  # an LLMUser of chat, completions, responses or messages reads them all
    read = set().union(*(OTHERS_READ.get(e, set()) for e in kinds.values()))
    for d in CLASS_OPTIONS:
        value = given(environment, d)
        if value is None or (d == "endpoint" and value in upload):
            continue
        if d in read or (d == "scenario" and "scenario name" in read and not is_scenario_file(str(value))):
            continue
        which = ", ".join(f"{c.__name__} ({e})" for c, e in kinds.items())
        raise ConfigError(f"{_said(d, value)}: no user class of this run reads it ({which}); it applies to LLMUser's "
                          "chat, completions, responses and messages (e.g. locustfiles/chat.py)")
