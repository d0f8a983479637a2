"""A worker's own copy of its rows (``PREFIX_requests.workerN.csv`` on its own disk), and what a
worker does when its master is gone.

Rows go to the file as they are shipped to the master, so the file holds everything the master
was sent and more: when the master dies (SIGKILL, a host lost), the workers' files are the run.
The prefix is the worker's own ``--csv``, else the master's (the master passes it on). The
``users`` column gets the other workers' counts as the master last passed them on, so the files
carry the same totals as the master's rows. A file that cannot be written (disk full) is said
once and dropped: the master still has the rows.

When no heartbeat came from the master for ``--master-lost-after`` seconds, the worker stops its
users (in-flight requests are recorded as cancelled), writes what is left, prints its own summary
and where its rows are, and exits with code 1.

Usage::

    rows = WorkerRows(own_prefix="runs/chat")
    rows.write(batch, index=0, others=link.others)     # before the batch is shipped
    master_lost(plugin, silence_s=21.0)                # from WorkerLink.watch_master
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from llmload.files import COL
from llmload.plugin.end_of_run import format_summary
from llmload.plugin.links import UserCounts
from llmload.plugin.run_files import OutputError, RequestsCsv, worker_requests_path

if TYPE_CHECKING:
    from llmload.plugin.wiring import LLMLoadPlugin

log = logging.getLogger("llmload")

_USERS = COL.users
_START = COL.start_time


class WorkerRows:
    def __init__(self, own_prefix: str | None) -> None:
        self.own_prefix = own_prefix or None
        self.master_prefix: str | None = None
        self.writer: RequestsCsv | None = None
        self.failed = False

    @property
    def prefix(self) -> str | None:
        return self.own_prefix or self.master_prefix

    def write(self, rows: list, index: int, others: UserCounts) -> None:
        if not rows or self.failed or not self.prefix:
            return
        try:
            if self.writer is None:
                self.writer = RequestsCsv(worker_requests_path(self.prefix, index))
            self.writer.write([(*r[:_USERS], others.total_at(r[_START], "", r[_USERS]), *r[_USERS + 1:])
                               for r in rows])
        except (OutputError, OSError) as e:
            self.failed = True
            log.error("llmload: this worker's own copy of its rows stops here: %s; the master still gets them", e)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
            self.writer = None


def master_lost(plugin: LLMLoadPlugin, silence_s: float) -> None:
    """Stop this worker and exit 1, keeping every row it has (run in a greenlet of its own)."""
    env = plugin.env
    runner = env.runner
    rows = plugin.worker_rows
    where = rows.prefix and worker_requests_path(rows.prefix, plugin.worker_index)
    log.error("llmload: no heartbeat from the master for %.0f s (--master-lost-after): stopping this worker; "
              "its rows are kept in %s", silence_s, where or "nothing (no --csv on the worker or the master)")
    env.process_exit_code = 1
    runner.stop()  # users stop, in-flight ones are recorded as cancelled; test_stop writes what is left
    table = plugin.stats.rows()
    if table:
        print("\n" + format_summary(table), flush=True)
    written = rows.writer.rows_written if rows.writer is not None else 0
    print(f"llmload: master lost; this worker kept {written} request rows in {where or '(no file)'}; merge the "
          f"workers' files with `llmload report FILE [FILE ...]`", flush=True)
    rows.close()
    runner.quit()
