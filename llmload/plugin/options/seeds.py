"""Which seed a user class draws its requests from, and what the summary says about it. Pure.

Every random choice of a workload (prompts, lengths, shared prefixes, sessions, arrivals, batches)
comes from one seed, so a run is reproducible from it:

* ``--seed N`` (the command line, or the web UI's form) wins;
* else a scenario file's ``seed:`` pins that file's workloads: every run sends the same requests;
* else the run's own seed, fresh per run (drawn by the leading process, :meth:`StartupGate.draw_seed`;
  Locust ships it to every worker, with ``seed_given``), so a prefix-caching server cannot answer a
  run from the cache of the one before.

Usage::

    workload_seed(environment.parsed_options, setup.scenario)   # the class's seed
    seed_line(environment.parsed_options, [s.scenario for s in config.setups.values()])
    # "workload seed 1690116979 (--seed 1690116979 sends the same prompts again)"
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any


def seed_given(opts: Any) -> bool:
    """``--seed`` came from the user (else the run drew its own)."""
    return bool(getattr(opts, "seed_given", False))


def run_seed(opts: Any) -> int:
    """``--seed``, or the one the run drew."""
    return int(getattr(opts, "seed", 0) or 0)


def workload_seed(opts: Any, scenario: Any = None) -> int:
    """The seed of a user class whose scenario file is ``scenario`` (None: no file)."""
    pinned = getattr(scenario, "seed", None)
    return run_seed(opts) if seed_given(opts) or pinned is None else int(pinned)


def seed_line(opts: Any, scenarios: Iterable[Any]) -> str:
    """The summary's line: the seed each part of the run drew from, and how to send it again."""
    seed, scenarios = run_seed(opts), list(scenarios)
    pinned = {s.path: s.seed for s in scenarios if s is not None and s.seed is not None}
    uses_run_seed = seed_given(opts) or not scenarios or any(s is None or s.seed is None for s in scenarios)
    parts = [f"workload seed {seed} (--seed {seed} sends the same prompts again)"] if uses_run_seed else []
    if pinned and not seed_given(opts):
        parts += [f"{path}: seed {s} from the file's seed: (every run sends the same prompts; --seed N "
                  "overrides it)" for path, s in sorted(pinned.items())]
    return "; ".join(parts)
