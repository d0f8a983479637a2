"""What a master's options carry to its workers: never a secret value (issue 19, row 7).

Locust's master sends its parsed options (every custom option, ``--header`` and ``--query``
included) and its host to each worker in every ``spawn`` message, in clear over ZeroMQ, and the
worker writes them over its own. Locust has no way to keep an option home (``is_secret`` only
masks a web-form field). So the master sends a copy (:func:`for_workers`) in which:

* a ``--header`` whose name says secret (:func:`llmload.wire.redact.is_secret_name`: Authorization,
  api-key, x-api-key, any name with key, token, secret, auth, ...) and whose value is a literal,
  not ``env:VAR``, is sent as ``Name: ***``; a secret-named ``--query`` parameter as ``name=***``;
* those two lists travel under keys of their own (``master_header``, ``master_query``),
  so Locust's update never writes over the worker's own ``--header``/``--query``: a withheld value
  is put back from there;
* ``--cluster-token`` is left out (each host has its own);
* the host's userinfo and secret query values are masked (:func:`~llmload.wire.redact.redact_url`).

A worker then uses the master's headers and query (:func:`own_or_master`), each withheld value
from its own command line or ``LLMLOAD_HEADER``/``LLMLOAD_QUERY`` (or ``env:VAR``, read in each
process). A worker that lacks one does not run the test: one line names the header and the fix.

Usage::

    send_without_secrets(master_runner)                # the master, once at init
    texts = own_or_master(vars(opts), "header")        # a worker, at each test start; ValueError
    host = own_host(shipped_host, own_launch_host)     # a worker; ValueError
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from llmload.wire.protocol import ENV_PREFIX
from llmload.wire.redact import MASK, is_secret_name, redact_url

SHIPPED_KEY = {"header": "master_header", "query": "master_query"}
"""Where the master's (withheld) list travels, per option."""
KEPT_HOME = frozenset({"cluster_token"})
_SEP = {"header": ":", "query": "="}
_FLAG_ENV = {"header": ("--header", "LLMLOAD_HEADER"), "query": ("--query", "LLMLOAD_QUERY")}


def _split(text: str, kind: str) -> tuple[str, str]:
    name, _, value = str(text).partition(_SEP[kind])
    return name.strip(), value.strip()


def _withheld(text: str, kind: str) -> bool:
    name, value = _split(text, kind)
    return is_secret_name(name) and not value.startswith(ENV_PREFIX)


def withhold(texts: Iterable[str], kind: str) -> list[str]:
    """``--header`` (``kind="header"``) or ``--query`` texts, each literal secret value masked."""
    sep = _SEP[kind]
    return [f"{_split(t, kind)[0]}{sep}{' ' if kind == 'header' else ''}{MASK}" if _withheld(t, kind) else str(t)
            for t in texts]


def for_workers(options: dict[str, Any]) -> dict[str, Any]:
    """The parsed options as a spawn message may carry them (see the module docstring)."""
    out = {k: v for k, v in options.items() if k not in KEPT_HOME and k not in SHIPPED_KEY}
    for kind, key in SHIPPED_KEY.items():
        out[key] = withhold(options.get(kind) or [], kind)
    return out


def spawn_for_workers(data: dict[str, Any]) -> dict[str, Any]:
    """A spawn message's data without a secret: its options and its host."""
    out = dict(data)
    if isinstance(data.get("parsed_options"), dict):
        out["parsed_options"] = for_workers(data["parsed_options"])
    if data.get("host"):
        out["host"] = redact_url(data["host"])
    return out


def own_or_master(options: dict[str, Any], kind: str) -> list[str]:
    """A worker's ``--header`` or ``--query`` texts: the master's, each withheld value from this
    process's own (a local process, a master, or a worker of an older master: its own)."""
    own = [str(t) for t in options.get(kind) or []]
    shipped = options.get(SHIPPED_KEY[kind])
    if shipped is None:
        return own
    flag, env = _FLAG_ENV[kind]
    sep = _SEP[kind]
    spare = list(own)
    out = []
    for text in shipped:
        name, value = _split(text, kind)
        if not (is_secret_name(name) and value == MASK):
            out.append(str(text))
            continue
        mine = next((t for t in spare if _split(t, kind)[0].lower() == name.lower()), None)
        if mine is None:
            example = f"{name}{sep}{' ' if kind == 'header' else ''}"
            raise ValueError(f"{flag} {name}: the master does not send secret values to its workers, and this worker "
                             f"has none; start it with the same {flag} '{example}...' (or {env}), or give "
                             f"'{example}env:VAR' with VAR set on every host")
        spare.remove(mine)
        out.append(mine)
    return out


def own_host(shipped: str | None, own: str | None) -> str | None:
    """The host a worker sends to: the master's, unless the master masked a secret in it (userinfo,
    a secret query parameter); then this worker's own ``--host``, which must be the same URL."""
    if not shipped or MASK not in shipped:
        return shipped
    if own and redact_url(own) == shipped:
        return own
    raise ValueError(f"--host: the master's host {shipped} carries a secret, which masters do not send to their "
                     "workers; start this worker with the same --host")


def send_without_secrets(runner: Any) -> None:
    """Make a master runner's spawn messages carry no secret (Locust sends them from its
    ``server.send_to_client``; every other message passes untouched)."""
    from locust.rpc import Message

    server = getattr(runner, "server", None)
    if server is None:  # a stand-in runner (tests): nothing is shipped
        return
    send = server.send_to_client

    def send_to_client(msg: Any) -> Any:
        if getattr(msg, "type", None) == "spawn" and isinstance(msg.data, dict):
            msg = Message(msg.type, spawn_for_workers(msg.data), msg.node_id)
        return send(msg)

    server.send_to_client = send_to_client
