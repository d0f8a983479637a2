"""What a master may make a worker open (issue 19, row 3 on the worker's side).

A worker takes every custom option from its master's spawn message (Locust writes them over its
own), and anyone who can start a master the worker connects to writes that message. Locust's own
file options (``--csv``, ``--html``, ``--logfile``, ...) never travel, and a worker keeps its rows
under its own prefix, beside the master's files only when it sees that very directory, else under
the master's relative path in its own working directory (:func:`llmload.files.worker_copy_prefix`);
what is left is llmload's options that open a file:

* ``--calibration`` and ``--ca-bundle`` are this worker's own, always: a different value from the
  master is ignored with one warning (a calibration is per host anyway);
* ``--scenario`` as a path is taken only when it resolves inside this worker's working directory
  or its locustfile's directory (or its parent, where scenario paths are looked up); a path
  elsewhere stops the test on this worker with one line.

The worker's own values come from its command line, parsed again (:func:`launch_options`): a
master may send a spawn message before this process's init, so ``environment.parsed_options``
may already hold the master's.

Usage::

    guard = WorkerGuard(launch_options(environment), roots)        # a worker, at init
    warnings = guard.restore(vars(environment.parsed_options))     # at each test start; ValueError
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from typing import Any

from locust.argument_parser import get_parser
from locust.runners import WorkerRunner

from llmload.plugin.options.web_form import is_scenario_path
from llmload.plugin.run.user_setup import class_anchor, locustfiles
from llmload.workload.file.scenario import resolve_scenario_path

OWN_FILES = ("calibration", "ca_bundle")
"""llmload's options that name a file a worker opens: always the worker's own."""


def launch_options(environment: Any) -> dict[str, Any]:
    """A worker's options as its command line, environment and config files give them (Locust's
    parser again); what init saw in any other process."""
    opts = getattr(environment, "parsed_options", None)
    seen = dict(vars(opts)) if opts is not None else {}
    if not isinstance(getattr(environment, "runner", None), WorkerRunner):
        return seen
    try:
        return vars(get_parser().parse_args())
    except (Exception, SystemExit):  # cannot happen for a command line Locust itself parsed
        return seen


def worker_roots(environment: Any) -> list[str]:
    """Where a master's scenario path may point: the working directory, and each locustfile's
    directory and its parent (where :func:`resolve_scenario_path` looks)."""
    anchors = [class_anchor(c) for c in getattr(environment, "user_classes", None) or []]
    anchors += locustfiles(environment)
    dirs = [os.getcwd()]
    for anchor in anchors:
        here = os.path.abspath(anchor)
        here = here if os.path.isdir(here) else os.path.dirname(here)
        dirs += [here, os.path.dirname(here)]
    return list(dict.fromkeys(dirs))


def _inside(path: str, roots: Iterable[str]) -> bool:
    real = os.path.realpath(path)
    return any(os.path.commonpath([real, root]) == root for root in roots)


class WorkerGuard:
    """A worker's own file options, and the directories a master's scenario path may name."""

    def __init__(self, launch: dict[str, Any], roots: Iterable[str]) -> None:
        self.launch = {k: launch.get(k) for k in (*OWN_FILES, "scenario")}
        self.roots = [os.path.realpath(r) for r in roots if r]

    def restore(self, current: dict[str, Any], anchors: Iterable[str] = ()) -> list[str]:
        """Put this worker's own file options back; one warning each. ValueError for a master's
        scenario path outside this worker's directories."""
        warnings = []
        for key in OWN_FILES:
            own, asked = self.launch.get(key), current.get(key)
            if asked != own and (asked or own):
                current[key] = own
                warnings.append(f"the master asked this worker to use {key} {asked!r} (names a file); kept this "
                                f"worker's own {own!r}. Give it on the worker's command line.")
        scenario = current.get("scenario")
        if scenario != self.launch.get("scenario") and is_scenario_path(scenario):
            where = resolve_scenario_path(str(scenario), *anchors)
            if not _inside(where, self.roots):
                raise ValueError(f"--scenario {scenario}: the master names a file outside this worker's directories "
                                 f"({', '.join(self.roots)}); start the worker in the scenario's directory, or "
                                 "with the same --scenario")
        return warnings
