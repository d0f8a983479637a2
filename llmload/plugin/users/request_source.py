"""What a user's requests come from when its scenario is a file: the workload it runs (one of the file's,
by weight, or the one its class names) and that workload built for this user: a trace, a call graph's
sessions, agent tasks or the scenario workload, each seeded per run, process and user.

Usage (from :meth:`llmload.plugin.users.llm_user.LLMUser.on_start`)::

    spec = pick_workload(scenario, user.workload, user.seed())
    user.source = scenario_workload(user, scenario, spec, model, endpoint, setup)
"""

from __future__ import annotations

import dataclasses
import random
from typing import Any

from llmload.plugin.run.user_setup import UserSetup
from llmload.workload.file.scenario import ScenarioSpec, WorkloadSpec
from llmload.workload.images import ImageSet
from llmload.workload.request import Workload
from llmload.workload.scenario_workload import ScenarioWorkload, stable_seed
from llmload.workload.tasks.agent import AgentWorkload
from llmload.workload.tasks.graph_session import GraphSession
from llmload.workload.trace.replay import TraceWorkload


def pick_workload(scenario: ScenarioSpec, name: str | None, seed: int) -> WorkloadSpec:
    """The workload ``name`` of the file, its only one, or one drawn by weight with ``seed``."""
    if name:
        return scenario.workload(name)
    if len(scenario.workloads) == 1:
        return scenario.workloads[0]
    rng = random.Random(seed)
    return rng.choices(scenario.workloads, weights=[w.weight for w in scenario.workloads])[0]


def scenario_workload(user: Any, scenario: ScenarioSpec, spec: WorkloadSpec, model: str, endpoint: str,
                      setup: UserSetup) -> Workload:
    """``spec`` built for ``user`` (its plugin's shared texts, prefixes and datasets; its seed)."""
    p = user.plugin
    shared = p.shared
    user_seed = user.seed()
    # the class's seed (plugin.options.seeds: --seed, else the file's seed:, else fresh per run) mixed with the
    # file's: the same prompts in every process of one run; a fresh seed, new ones the next run
    scenario = dataclasses.replace(scenario, seed=stable_seed(scenario.seed or 0, user.run_seed()))
    text = shared.text_source(scenario.seed + p.worker_index, scenario.tokenizer)
    ignore_eos = True if p.option("ignore_eos") else None
    im = spec.images
    images = None if im is None else ImageSet(im.count, im.width, im.height, im.format, im.distinct,
                                              stable_seed(scenario.seed, spec.name, "images"))
    if spec.trace is not None:
        return TraceWorkload(spec, scenario.seed, user_seed, model, text, images=images, ignore_eos=ignore_eos,
                             chat=endpoint == "chat")
    if spec.graph is not None:  # the shared context from one text in every process: a prefix across workers
        return GraphSession(spec, user_seed, model, text, output_tokens=setup.output_override,
                            ignore_eos=ignore_eos, shared_text=shared.text_source(scenario.seed, scenario.tokenizer))
    if spec.agent is not None:
        return AgentWorkload(spec, user_seed, model, text, images=images, input_tokens=setup.input_override,
                             output_tokens=setup.output_override, ignore_eos=ignore_eos)
    return ScenarioWorkload(
        spec, scenario_seed=scenario.seed, user_seed=user_seed, model=model, text=text,
        prefixes=shared.prefix_pool(scenario, spec),
        conversations=shared.conversations(spec) if spec.dataset is not None else None,
        input_tokens=setup.input_override, output_tokens=setup.output_override,
        ignore_eos=ignore_eos, endpoint=endpoint, images=images)
