"""The run's file contract: what a run writes beside its ``--csv`` PREFIX, under which names.

Names, plus the one way a whole file is written (:func:`replace_atomically`: a reader never sees
half a file). Every writer (the plugin, the web UI's downloads, calibrate, the demo) and every
reader (the report, compare, calibrate) takes the names from here.

Usage::

    from llmload import files
    files.path("runs/chat", files.REQUESTS)   # "runs/chat_requests.csv"
    files.prefix_of("runs/chat_requests.worker0.csv")  # "runs/chat"
"""

from __future__ import annotations

import os
import re
import tempfile

REQUESTS = "_requests.csv"  # one row per request (metrics.record.CSV_COLUMNS)
LLM_STATS = "_llm_stats.csv"  # one row per scenario and the aggregate, at the end of a run
HISTORY = "_llm_history.csv"  # one row per scenario per live interval
SERVER_METRICS = "_server_metrics.csv"  # long format: time,endpoint,metric,labels,value
MANIFEST = "_run.json"  # what the run was (plugin.run_manifest)

_REQUESTS_FILE = re.compile(r"_requests(\.[^/]*)?\.csv$")


def path(prefix: str, suffix: str) -> str:
    """The file of ``suffix`` (one of the constants above) for a run's ``--csv`` prefix."""
    return f"{prefix}{suffix}"


def prefix_of(requests_file: str) -> str:
    """``runs/chat_requests.csv`` or ``runs/chat_requests.worker0.csv`` → ``runs/chat``; a path that
    is not a requests file is taken as a prefix already."""
    return _REQUESTS_FILE.sub("", requests_file)


def replace_atomically(path: str, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all: a temporary file of a unique name beside it
    (two writers into one folder never share one), flushed to disk, then renamed over ``path``."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise
