"""The checks before a run starts, in one place: the configuration (:mod:`llmload.plugin.config`), the
server's preflight probe (:mod:`llmload.transport.models`) and the open-files limit (:mod:`llmload.net.limits`).

At init (``at_init=True``) a headless or autostarted run is checked whole, the server probed as
``--preflight`` says (end, wait or off). At each test start the configuration is checked again
(the web UI's form or the master's options may have changed it), and a run started from the web
UI probes the server once, without waiting: a page must not hang.

Usage::

    config = checked_config(environment, leads=True, at_init=True)   # raises ConfigError
"""

from __future__ import annotations

import os
import sys
from typing import Any

from llmload.net.limits import raise_fd_limit
from llmload.plugin.config import ConfigError, RunConfig, build_config
from llmload.transport.models import preflight

_IMPORT_PID = os.getpid()  # Locust forks --processes after importing the locustfile (and this)


def quiet_child() -> bool:
    """A process Locust forked for --processes under a master: the master reports the problem."""
    worker_cli = "--worker" in sys.argv or bool(os.environ.get("LOCUST_MODE_WORKER"))
    return os.getpid() != _IMPORT_PID and not worker_cli


def server_address(environment: Any) -> str:
    """``--host``, else the first user class's ``host``."""
    hosts = [getattr(c, "host", None) for c in (getattr(environment, "user_classes", None) or [])]
    return environment.host or next((h for h in hosts if h), "") or ""


def checked_config(environment: Any, leads: bool, at_init: bool) -> RunConfig:
    """The run's configuration, checked; ``leads``: this process talks to the server before the
    users do (the master or a local process; a worker takes its master's word)."""
    opts = environment.parsed_options
    unattended = bool(opts is not None and (opts.headless or opts.autostart))
    if at_init:
        raise_fd_limit()
    config = build_config(environment, require_host=leads and (unattended or not at_init))
    host = server_address(environment)
    if not leads or not host or config.faults.preflight == "off":
        return config
    problem = None
    if at_init and unattended:
        problem = preflight(host, config.client, config.faults.preflight, config.faults.preflight_wait_s)
    elif not at_init and not unattended:
        problem = preflight(host, config.client, "end", 0.0)
    if problem:
        raise ConfigError(problem)
    return config
