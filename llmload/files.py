"""The run's file contract: what a run writes beside its ``--csv`` PREFIX, under which names.

Names, plus the one way a whole file is written (:func:`replace_atomically`: a reader never sees
half a file). Every writer (the plugin, the web UI's downloads, calibrate, the demo) and every
reader (the report, compare, calibrate) takes the names from here: the files' suffixes, the
columns of PREFIX_requests.csv and PREFIX_server_metrics.csv (and PREFIX_gpu_metrics.csv), and a row's cells by name.
(PREFIX_llm_stats.csv's and PREFIX_llm_history.csv's metric columns follow :mod:`llmload.metrics.catalog`:
:mod:`llmload.metrics.stats` and :mod:`llmload.plugin.output.run_files` spell them.)

Usage::

    from llmload import files
    files.path("runs/chat", files.REQUESTS)            # "runs/chat_requests.csv"
    files.prefix_of("runs/chat_requests.worker0.csv")  # "runs/chat"
    files.worker_path("runs/chat", 0)              # "runs/chat_requests.worker0.csv"
    row[files.COL.users]                               # a requests row's users cell (REQUESTS_COLUMNS order)
    users = files.COL.users                            # in a loop over rows: the index once, outside it
"""

from __future__ import annotations

import os
import re
import tempfile
from collections import namedtuple

REQUESTS = "_requests.csv"  # one row per request (metrics.record.CSV_COLUMNS)
LLM_STATS = "_llm_stats.csv"  # one row per scenario and the aggregate, at the end of a run
HISTORY = "_llm_history.csv"  # one row per scenario per live interval
SERVER_METRICS = "_server_metrics.csv"  # long format: time,endpoint,metric,labels,value
GPU_METRICS = "_gpu_metrics.csv"  # the same long format, dcgm-exporter's DCGM_* series (--gpu-metrics)
MANIFEST = "_run.json"  # what the run was (plugin.run_manifest)
WORKER_REQUESTS = "_requests.worker{index}.csv"  # a worker's own copy of its rows, on its own disk

# PREFIX_requests.csv, in this order (users read them by name; new columns go at the end)
REQUESTS_COLUMNS = (
    "request_id", "start_time", "scenario", "status", "http_status", "ttft_ms", "ttft_visible_ms",
    "tpot_ms", "e2e_ms", "itl_max_ms", "prompt_tokens", "cached_tokens", "completion_tokens",
    "max_tokens", "token_source", "finish_reason", "users", "worker", "session_id", "turn", "error",
    "scheduled_time", "requested_input_tokens", "arrival_rate", "run_id", "coalesced_reads", "step_kind",
    "requested_image_tokens", "backoff_ms", "call_id", "call_after", "trace_id", "phase", "inputs",
    "model", "priority", "audio_seconds",
)
WARMUP_PHASE = "warmup"  # the phase cell of a request that started in the --warmup-seconds warm-up (else empty)
ALONE_PHASE_PREFIX = "alone:"  # --isolation: the phase cell of a request of class C while C ran alone (alone:C)
TOGETHER_PHASE = "together"  # --isolation: ... while every class ran together

# PREFIX_server_metrics.csv and PREFIX_gpu_metrics.csv, long format: one row per sample per scrape
SERVER_METRICS_COLUMNS = ("time", "endpoint", "metric", "labels", "value")

RequestsColumns = namedtuple("RequestsColumns", REQUESTS_COLUMNS)  # type: ignore[misc]  # fields from the tuple
COL = RequestsColumns(*range(len(REQUESTS_COLUMNS)))
"""The index of each PREFIX_requests.csv column in a row tuple: ``COL.users == 16``."""

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


def worker_own_prefix(own: str | None, master: str | None) -> str | None:
    """Where a worker keeps its copy of its rows: its own ``--csv`` prefix, else the master's file
    name in the worker's working directory. Never a path the master names: whoever speaks the
    master's protocol must not pick where workers create files."""
    if own:
        return own
    name = os.path.basename((master or "").rstrip("/\\")) if master else ""
    return name if name and name not in (".", "..") else None


def of_run(file_path: str, run_id: str) -> str:
    """An earlier test's copy of a per-test file in a session of several: ``runs/chat_run.json`` →
    ``runs/chat_run.<run_id>.json`` (the usual name always holds the latest test's)."""
    stem, dot, ext = file_path.rpartition(".")
    return f"{stem}.{run_id}.{ext}" if dot else f"{file_path}.{run_id}"


CALIBRATION_PAGE = ".html"  # `llmload calibrate`'s curve as a page, beside its JSON


def calibration_page(json_path: str) -> str:
    """``~/.cache/llmload/calibration.json`` → ``~/.cache/llmload/calibration.html``."""
    page = os.path.splitext(json_path)[0] + CALIBRATION_PAGE
    return page if page != json_path else json_path + ".page" + CALIBRATION_PAGE
