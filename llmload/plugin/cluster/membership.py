"""Who belongs to a run: who may join it, and a worker that lost its master.

Who may join (issue 19): Locust's master takes any peer that reaches its ZeroMQ port as a
worker, with no authentication. With ``--cluster-token`` (or ``LLMLOAD_CLUSTER_TOKEN``) set on the
master, a worker's payloads count only when they carry the same token: a worker without it is
refused, named once in the log and in the summary, and none of its rows reach the files.

The token is read once at init and then blanked in the parsed options, because Locust sends a
master's custom options to every worker that joins.

Usage::

    token = cluster_token(parts)                               # at init, on every host
    admits(client_id, payload, token, refused)                 # master: take this payload?
"""

from __future__ import annotations

import logging
import os
from typing import Any

from llmload.plugin.cluster import messages
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


def admits(client_id: str, payload: Any, token: str, refused: set[str]) -> bool:
    """Whether the master takes ``payload``; a worker refused for the first time is logged."""
    if messages.token_ok(payload, token):
        return True
    if client_id not in refused:
        log.error("llmload: worker %s refused: it did not present this master's --cluster-token; none of its rows "
                  "reach the report", client_id)
    return False


def refused_note(refused: list[str]) -> str:
    return "\n".join(f"REFUSED WORKER {c}: it did not present the --cluster-token; its rows are not in these files"
                     for c in refused)


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
