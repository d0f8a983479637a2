"""The checks before a run starts, in one place: the configuration (:mod:`llmload.plugin.run.config`), the
server's preflight probe (:mod:`llmload.transport.models`) and the open-files limit (:mod:`llmload.net.limits`).

At init (``at_init=True``) a headless or autostarted run is checked whole, the server probed as
``--preflight`` says (end, wait or off). At each test start the configuration is checked again
(the web UI's form or the master's options may have changed it), and a run started from the web
UI probes the server once, without waiting: a page must not hang.

:class:`ConfigGate` holds the result for the plugin: a bad configuration ends the run at init
with one line and exit code 1; at a test start it stops the test (logged once) and the users of
that test stop quietly.

Usage::

    config = checked_config(environment, leads=True, at_init=True)   # raises ConfigError
    gate = ConfigGate(environment, leads=True); gate.check_at_init(); gate.setup_for(MyUser)
"""

from __future__ import annotations

import dataclasses
import logging
import os
import secrets
import sys
from typing import Any

import gevent
from locust.exception import StopUser

from llmload.net.limits import check_fd_budget, raise_fd_limit
from llmload.plugin.options.flags import form_dests
from llmload.plugin.options.shipped_options import own_host
from llmload.plugin.options.web_form import FormGuard
from llmload.plugin.run.config import ConfigError, RunConfig, build_config
from llmload.plugin.run.option_scope import ASKS, HAS_IT, NAMED, check_option_scope, flag
from llmload.plugin.run.user_setup import UserSetup
from llmload.plugin.run.worker_guard import WorkerGuard, launch_options, worker_roots
from llmload.transport.connection import ClientOptions
from llmload.transport.credentials import CredentialBinding
from llmload.transport.models import preflight, unserved_model

log = logging.getLogger("llmload")
_IMPORT_PID = os.getpid()  # Locust forks --processes after importing the locustfile (and this)


def quiet_child() -> bool:
    """A process Locust forked for --processes under a master: the master reports the problem."""
    worker_cli = "--worker" in sys.argv or bool(os.environ.get("LOCUST_MODE_WORKER"))
    return os.getpid() != _IMPORT_PID and not worker_cli


def server_address(environment: Any) -> str:
    """``--host``, else the first user class's ``host``."""
    hosts = [getattr(c, "host", None) for c in (getattr(environment, "user_classes", None) or [])]
    return environment.host or next((h for h in hosts if h), "") or ""


def checked_config(environment: Any, leads: bool, at_init: bool,
                   binding: CredentialBinding | None = None) -> RunConfig:
    """The run's configuration, checked; ``leads``: this process talks to the server before the
    users do (the master or a local process; a worker takes its master's word). With ``binding``,
    the client's key and secret headers are held back from a host they are not bound to."""
    opts = environment.parsed_options
    unattended = bool(opts is not None and (opts.headless or opts.autostart))
    if at_init:
        raise_fd_limit()
        shapes = sorted(getattr(environment, "available_shape_classes", None) or {})
        if leads and len(shapes) > 1 and not getattr(opts, "class_picker", False):
            # Locust would quietly run the first shape and ignore the form's user count
            raise ConfigError(f"the locustfile has several load shapes ({', '.join(shapes)}): start Locust with "
                              "--class-picker to choose one in the web UI, or keep one shape in the locustfile")
    config = build_config(environment, require_host=leads and (unattended or not at_init))
    if leads:  # shapes run here: an option no shape or user class reads is refused, or names the shape to run
        config.applied_shape = check_option_scope(environment, config)
        if config.applied_shape is not None and not at_init:
            asked = next(d for d, k in ASKS.items() if k == config.applied_shape)
            raise ConfigError(f"{flag(asked)}: the locustfile has no load shape, and one cannot be added to a test "
                              f"started from the web UI; start Locust with {flag(asked)} (llmload then runs its "
                              f"{NAMED[config.applied_shape]}), or run {HAS_IT[config.applied_shape]}")
    host = server_address(environment)
    if binding is not None and host:
        client, warning = binding.client_for(host, config.client)
        if warning:
            log.warning("llmload: %s", warning)
            config = dataclasses.replace(config, client=client)
    if not leads or not host or config.faults.preflight == "off":
        return config
    problem = None
    if at_init and unattended:
        problem = preflight(host, config.client, config.faults.preflight, config.faults.preflight_wait_s)
    elif not at_init and not unattended:
        problem = preflight(host, config.client, "end", 0.0)
    if problem is None and at_init and unattended:
        problem = unserved_model(host, config.client, named_models(environment, config))
    if problem:
        raise ConfigError(problem)
    return config


def named_models(environment: Any, config: RunConfig) -> dict[str, str]:
    """Each model name the run sends that the user typed, with the flag or key that set it (as the
    users choose: a workload's ``models:`` mix, else ``--model``, else its ``model:``)."""
    flag = getattr(environment.parsed_options, "model", None)
    out: dict[str, str] = {}
    for spec in config.scenarios:
        for w in spec.workloads:
            if w.models:
                for name in w.models.names:
                    out.setdefault(name, f"workloads.{w.name}.models")
            elif not flag and w.model:
                out.setdefault(w.model, f"workloads.{w.name}.model")
    if flag:
        out.setdefault(flag, "--model")
    return out


class ConfigGate:
    """The run's checked configuration in one Locust process; see the module docstring."""

    def __init__(self, environment: Any, leads: bool) -> None:
        self.env = environment
        self.leads = leads
        opts = environment.parsed_options
        # What the launch said: the web UI's start may change only its form's fields (web_form), and
        # the key stays with the launch's host, or the first host of a web-UI session (credentials).
        self._form = FormGuard(dict(vars(opts)), form_dests()) if opts is not None else None
        # A worker opens only the files its own command line names, whatever its master sends.
        self._worker = None if leads else WorkerGuard(launch_options(environment), worker_roots(environment))
        self.binding = CredentialBinding(allow_any_host=bool(getattr(opts, "allow_key_to_any_host", False)))
        self.binding.bind(server_address(environment))
        self._config: RunConfig | None = None
        self._drawn = ""  # the seed this process drew for the current test ('' when the user gave one)
        self.error = ""
        """Why this test cannot run ('' when it can)."""

    @property
    def config(self) -> RunConfig:
        """The checked configuration (built on first use in a hand-built Environment)."""
        if self._config is None:
            self._config = build_config(self.env)
        return self._config

    @property
    def checked(self) -> RunConfig | None:
        """The configuration as the last check left it (None if it has not been built)."""
        return self._config

    def draw_seed(self) -> None:
        """A fresh run seed unless --seed was given (the leading process draws it; Locust ships the
        options, so every worker uses it): two runs of one setup do not send identical prompts."""
        opts = self.env.parsed_options
        if not self.leads or opts is None:
            return
        text = str(getattr(opts, "seed", "") or "").strip()
        if text == self._drawn:  # the one drawn for the last test, not one the user gave: draw again
            text = ""
        if text and not text.isdigit():
            raise ConfigError(f"--seed {text!r}: expected a whole number >= 0")
        opts.seed_given = bool(text)  # a scenario file's seed: yields to a given one only (plugin.options.seeds)
        if not text:
            text = self._drawn = str(secrets.randbelow(2**31))
        opts.seed = text

    def check_at_init(self) -> None:
        """Fail once, before any user starts: one line, exit code 1."""
        try:
            self.draw_seed()
            self._config = checked_config(self.env, self.leads, at_init=True, binding=self.binding)
        except ConfigError as e:
            if not quiet_child():
                sys.stderr.write(f"llmload: {e}\n")
                sys.stderr.flush()
            raise SystemExit(1) from None

    def check_at_start(self) -> None:
        # The web UI's form or the master's options may have changed what init saw.
        self.error = ""
        opts = self.env.parsed_options
        if self.leads and self._form is not None and opts is not None:
            for warning in self._form.restore(vars(opts)):
                log.warning("llmload: %s", warning)
        try:
            if self._worker is not None and opts is not None:
                for warning in self._worker.restore(vars(opts), worker_roots(self.env)):
                    log.warning("llmload: %s", warning)
                self.env.host = own_host(self.env.host, getattr(opts, "host", None))  # the master masks its secrets
        except ValueError as e:
            self.fail(str(e))
            return
        self.binding.bind(server_address(self.env))
        try:
            self.draw_seed()  # each test of a web-UI session gets its own, unless --seed was given
            self._config = checked_config(self.env, self.leads, at_init=False, binding=self.binding)
        except ConfigError as e:
            self.fail(str(e))

    def fail(self, message: str) -> None:
        if not self.error:
            self.error = message
            log.error("llmload: %s; the test is stopped", message)
            if self.leads and self.env.runner is not None:
                gevent.spawn(self.env.runner.stop)

    def client_for(self, host: str, client: ClientOptions) -> ClientOptions:
        """``client`` (with a user's scenario headers) as it may go to ``host``."""
        return self.binding.client_for(host, client)[0] if host else client

    def setup_for(self, user_class: type) -> UserSetup:
        """A user class's setup; a user of a run that cannot start stops quietly (logged once)."""
        if self.error:
            raise StopUser()
        check_fd_budget(self.env.runner.user_count if self.env.runner is not None else 0)  # a socket per user
        try:
            return self.config.setup_for(user_class)
        except ConfigError as e:
            self.fail(str(e))
            raise StopUser() from None
