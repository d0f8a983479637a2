"""How the users of one class run, as the command line and the class say together (:class:`UserSetup`):
the scenario file and its workload, the endpoint (checked against
:data:`llmload.wire.endpoints.ENDPOINTS`), the transport, the lengths. Scenario paths are resolved
one way everywhere (anchored at the user class's locustfile, :func:`class_anchor`). A mistake is one
:class:`~llmload.plugin.options.option_checks.ConfigError` naming the option or the class.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any

from llmload.plugin.options.flags import option
from llmload.plugin.options.option_checks import (
    ConfigError,
)
from llmload.transport import TRANSPORTS
from llmload.wire.endpoints import BODY, STREAM, UPLOAD, endpoint, known, names
from llmload.workload.distributions import Distribution, SpecError, parse_distribution
from llmload.workload.file.scenario import ScenarioSpec, is_scenario_file, load_scenario_cached, resolve_scenario_path
from llmload.workload.synthetic import LengthRange


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


def user_setup(environment: Any, user_class: type) -> UserSetup:
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
    if not known(class_endpoint):
        raise ConfigError(f"{cls_name}.endpoint {class_endpoint!r}: expected one of {', '.join(names(STREAM))} (or "
                          f"{', '.join(names(BODY))} for LLMEmbeddingsUser, LLMRerankUser and scenario workloads, "
                          f"{', '.join(names(UPLOAD))} for LLMAudioUser)")
    class_answer = endpoint(class_endpoint).answer
    chosen = option(environment, "endpoint")
    if known(chosen) and endpoint(chosen).answer == UPLOAD:  # a user class of its own: --endpoint audio names it
        if class_endpoint != chosen:
            raise ConfigError(f"--endpoint {chosen}: {cls_name} sends {class_endpoint}; transcription runs in "
                              "LLMAudioUser (locust -f locustfiles/audio.py)")
        chosen = None
    if chosen is not None and not (known(chosen) and endpoint(chosen).answer == STREAM):
        raise ConfigError(f"--endpoint {chosen!r}: expected one of {', '.join(names(STREAM))}")
    transport = option(environment, "transport") or getattr(user_class, "transport_name", None) or "fast"
    if transport not in TRANSPORTS:
        where = "--transport" if option(environment, "transport") else f"{cls_name}.transport_name"
        raise ConfigError(f"{where} {transport!r}: expected one of {', '.join(TRANSPORTS)}")
    if transport == "openai" and class_answer != STREAM:
        raise ConfigError(f"--transport openai: {cls_name} ({class_endpoint}) runs on the fast transport only; drop "
                          "--transport openai")
    if transport == "openai":
        used = {chosen} if chosen else ({w.endpoint for w in scenario.workloads} if scenario else {class_endpoint})
        if "messages" in used:
            raise ConfigError("--transport openai cannot send the Anthropic Messages API (endpoint messages): the "
                              "openai SDK has no /v1/messages; use --transport fast")
        whole = [w for w in scenario.workloads if endpoint(w.endpoint).answer == BODY or w.pipeline] if scenario else []
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
        endpoint=chosen,
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
