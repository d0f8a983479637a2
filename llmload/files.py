"""The run's file contract: what a run writes beside its ``--csv`` PREFIX, under which names.

Pure: names only, no I/O. Every writer (the plugin, the web UI's downloads, calibrate, the demo)
and every reader (the report, compare, calibrate) takes the names from here.

Usage::

    from llmload import files
    files.path("runs/chat", files.REQUESTS)   # "runs/chat_requests.csv"
    files.prefix_of("runs/chat_requests.worker0.csv")  # "runs/chat"
"""

from __future__ import annotations

import re

REQUESTS = "_requests.csv"  # one row per request (metrics.record.CSV_COLUMNS)
LLM_STATS = "_llm_stats.csv"  # one row per scenario and the aggregate, at the end of a run
HISTORY = "_llm_history.csv"  # one row per scenario per live interval
SERVER_METRICS = "_server_metrics.csv"  # long format: time,endpoint,metric,labels,value
MANIFEST = "_run.json"  # what the run was (plugin.run_manifest)
WORKER_REQUESTS = "_requests.worker{index}.csv"  # a worker's own copy of its rows, on its own disk

_REQUESTS_FILE = re.compile(r"_requests(\.[^/]*)?\.csv$")


def path(prefix: str, suffix: str) -> str:
    """The file of ``suffix`` (one of the constants above) for a run's ``--csv`` prefix."""
    return f"{prefix}{suffix}"


def worker_path(prefix: str, index: int | str) -> str:
    """Where worker ``index`` keeps its own rows: ``runs/chat_requests.worker0.csv``."""
    return path(prefix, WORKER_REQUESTS.format(index=index))


def prefix_of(requests_file: str) -> str:
    """``runs/chat_requests.csv`` or ``runs/chat_requests.worker0.csv`` → ``runs/chat``; a path that
    is not a requests file is taken as a prefix already."""
    return _REQUESTS_FILE.sub("", requests_file)
