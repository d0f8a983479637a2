"""Where each worker keeps its own copy of its rows (``PREFIX_requests.workerN.csv``), told both ways:
the master sends its ``--csv`` with the directory it names (absolute, and its device and inode, so a
worker can tell it sees the very same directory: :func:`llmload.files.worker_copy_prefix`), and each
worker's payloads say where its copy is, so the master's end-of-run summary can say it too. Pure.

Usage::

    payload = master_csv("some/dir/big")                     # the master's part of llmload_processes
    files.take_master_csv(payload)                            # a worker (RunFiles)
    keep_own_copy(parts, link.others, rows, index)            # a worker, as it ships rows
    print(copies_note(master.copies, "some/dir/big_requests.csv"))
"""

from __future__ import annotations

import os
import socket
from typing import Any

from llmload.files import BESIDE, COL, IN_CWD, OWN, RELATIVE, directory_id


def keep_own_copy(parts: Any, others: Any, rows: list[tuple], index: int) -> None:
    """A worker keeps the rows it sends on its own disk (PREFIX_requests.workerN.csv), with the
    other workers' user counts as the master last passed them on (``others``: a
    :class:`~llmload.plugin.cluster.links.UserCounts`), and its run id, warm-up and phases."""
    files = parts.files
    if not rows or not files.keeps_worker_rows:
        return
    col, start = COL.users, COL.start_time
    rows = parts.phase_marks.stamp(parts.warmup_rows.stamp(parts.run.stamp(rows)))
    files.write_worker_rows([(*r[:col], others.total_at(r[start], "", r[col]), *r[col + 1:]) for r in rows], index)


def master_csv(prefix: str) -> dict[str, Any]:
    """The master's ``--csv`` as PROCESSES carries it: ``csv``, ``csv_dir``, ``csv_dir_id``."""
    where = os.path.abspath(os.path.dirname(prefix) or ".") if prefix else ""
    dir_id = directory_id(where) if where else None
    return {"csv": prefix, "csv_dir": where, "csv_dir_id": list(dir_id) if dir_id else None}


_HOW = {OWN: "its own --csv", BESIDE: "beside these files", RELATIVE: "the master's --csv path, under its working "
        "directory", IN_CWD: "the master's file name, in its working directory"}


def copies_note(copies: dict[str, dict[str, Any]], here: str | None = None) -> str:
    """One line per worker that keeps a copy: where, on which host, and why there."""
    lines = []
    me = socket.gethostname()
    for client_id, c in sorted(copies.items(), key=lambda kv: str(kv[1].get("index"))):
        host = "" if c.get("host") == me else f" on host {c.get('host')}"
        lines.append(f"llmload: worker {c.get('index', '?')}{host} ({client_id}) keeps its own copy of its rows in "
                     f"{c.get('path')} ({_HOW.get(c.get('how', ''), 'its own disk')})")
    return "\n".join(lines)
