"""Who belongs to a run: whose messages the master takes, and a worker that lost its master.

Who may join (issue 19): Locust's master takes any peer that reaches its ZeroMQ port as a
worker, with no authentication. With ``--cluster-token`` (or ``LLMLOAD_CLUSTER_TOKEN``) set on the
master, a worker's payloads count only when they carry the same token: a worker without it is
refused, named once in the log and in the summary, and none of its rows reach the files.

The token is read once at init and then blanked in the parsed options, because Locust sends a
master's custom options to every worker that joins.

What the master takes (issue 35; :class:`Gate`): only messages of workers that joined (the channel
guard, :mod:`llmload.plugin.cluster.channel_guard`, drops everything else), with the token, of this protocol
version, of the shape their message declares (:mod:`llmload.plugin.cluster.messages`), and about the
worker index this master gave the sender. A worker without the token or of another version is
refused whole (``REFUSED WORKER``, never waited for); a message of the wrong shape is refused alone,
named with its reason (the first ``SAID_PER_WORKER`` of each worker) and counted (``REFUSED
MESSAGES``, exit code 1): the worker's other messages still count, and the requests it had
announced in it are its lost rows.

Usage::

    token = cluster_token(parts)                               # at init, on every host
    gate = Gate(token, index_of)                               # master
    gate.admits(client_id, messages.ROWS, payload)             # take this payload?
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from typing import Any

from llmload.plugin.cluster import messages
from llmload.plugin.cluster.schema import shown
from llmload.plugin.output.end_of_run import format_summary
from llmload.plugin.run.run_parts import RunParts

log = logging.getLogger("llmload")


def cluster_token(parts: RunParts) -> str:
    """This process's --cluster-token ('' when none), taken out of the options Locust ships."""
    opts = parts.env.parsed_options
    token = str(getattr(opts, "cluster_token", "") or "")
    if opts is not None and token:
        opts.cluster_token = ""
    return token


NO_TOKEN = "it did not present the --cluster-token"
SAID_PER_WORKER = 10
"""Refused messages of one worker named in the log, each with its reason; the rest are counted."""


class Gate:
    """The master's judge of each llmload message from a worker (see the module docstring)."""

    def __init__(self, token: str = "", index_of: Callable[[str], int | None] = lambda client_id: None) -> None:
        self.token = token
        self.index_of = index_of  # the worker index Locust gave a worker (None: unknown here)
        self.refused: dict[str, str] = {}  # worker → why every message of it is refused
        self.bad: dict[str, dict[str, list]] = {}  # worker → message → [refused, the first reason]

    def admits(self, client_id: str, message: messages.MessageType, payload: Any) -> bool:
        if client_id in self.refused:
            return False
        if message is not messages.SENT:
            if not messages.token_ok(payload, self.token):
                return self._refuse_worker(client_id, NO_TOKEN)
            if (why := messages.mismatch(payload)) and (message.fields and "version" in message.fields):
                return self._refuse_worker(client_id, why)
        why = message.refusal(payload) or self._wrong_index(client_id, payload)
        if why:
            return self._refuse_message(client_id, message, why)
        return True

    def _wrong_index(self, client_id: str, payload: dict[str, Any]) -> str:
        given = self.index_of(client_id)
        if given is None or type(payload) is not dict:
            return ""
        if "index" in payload and payload["index"] != given:
            return f"it claims worker index {payload['index']}; this master gave it {given}"
        for row in payload.get("rows") or ():
            if row[messages.WORKER_COL] != given:
                return (f"a row of worker {row[messages.WORKER_COL]} (request {shown(row[0])}); this master gave it "
                        f"index {given}")
        return ""

    def _refuse_worker(self, client_id: str, why: str) -> bool:
        self.refused[client_id] = why
        if why == NO_TOKEN:
            log.error("llmload: worker %s refused: it did not present this master's --cluster-token; none of its "
                      "rows reach the report", client_id)
        else:
            log.error("llmload: worker %s ignored: %s", client_id, why)
        return False

    def _refuse_message(self, client_id: str, message: messages.MessageType, why: str) -> bool:
        by_message = self.bad.setdefault(client_id, {})
        said = sum(n for n, _ in by_message.values())
        seen = by_message.setdefault(message.name, [0, why])
        seen[0] += 1
        if said < SAID_PER_WORKER:
            log.error("llmload: worker %s (index %s): refused its %s: %s; its other messages still count",
                      client_id, self._index(client_id), message.name, why)
        elif said == SAID_PER_WORKER:
            log.error("llmload: worker %s: further refused messages are counted, not logged (the summary has them)",
                      client_id)
        return False

    @property
    def refused_messages(self) -> int:
        """Messages of workers that joined and count, refused for their shape: what they said is missing."""
        return sum(n for by_message in self.bad.values() for n, _ in by_message.values())

    def _index(self, client_id: str) -> int | str:
        index = self.index_of(client_id)
        return "?" if index is None else index

    def note(self) -> str:
        """The summary's lines: every worker refused whole, every message refused."""
        lines = [f"REFUSED WORKER {c}: {why}; its rows are not in these files"
                 for c, why in sorted(self.refused.items())]
        for client_id, by_message in sorted(self.bad.items()):
            said = "; ".join(f"{n} x {name} (the first: {why})" for name, (n, why) in sorted(by_message.items()))
            lines.append(f"REFUSED MESSAGES from worker {client_id} (index {self._index(client_id)}): {said}")
        return "\n".join(lines)


def stop_without_master(parts: RunParts, env: Any, runner: Any, index: int, silence_s: float) -> None:
    """A worker whose master is gone: stop, keep every row on its own disk, exit 1."""
    files = parts.files
    where = files.worker_path(index)
    where = os.path.abspath(where) if where else None  # the worker's own disk: say exactly where
    log.error("llmload: no heartbeat from the master for %.0f s (--master-lost-after): stopping this worker; "
              "its rows are kept in %s", silence_s, where or "nothing (no --csv on the worker or the master)")
    env.process_exit_code = 1
    runner.stop()  # users stop, in-flight ones are recorded as cancelled; test_stop writes what is left
    table = parts.stats.rows()
    if table:
        print("\n" + format_summary(table), flush=True)
    written = files.requests.rows_written if files.requests is not None else 0
    print(f"llmload: master lost; this worker kept {written} request rows in {where or '(no file)'}; merge the "
          f"workers' files with `llmload report FILE [FILE ...]`", flush=True)
    files.close()
    runner.quit()
