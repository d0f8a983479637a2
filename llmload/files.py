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
import stat
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
    "model", "priority", "audio_seconds", "resent_input_tokens",
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


def replace_atomically(path: str, text: str, sync: bool = True) -> None:
    """Write ``text`` to ``path`` whole or not at all: a temporary file of a unique name beside it
    (two writers into one folder never share one), flushed to disk, then renamed over ``path``. The
    file gets the mode ``open()`` would give it (0666 less the umask, as Locust's CSVs): ``mkstemp``
    makes it 0600, which would hide a report from the team on a shared machine. No writer puts a
    secret in these files (the manifest's command line is redacted), so nothing needs 0600."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
        with os.fdopen(fd, "w", encoding="utf-8", newline="") as f:
            f.write(text)
            f.flush()
            if sync:  # a first draft about to be rewritten need not wait for the disk
                os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.remove(tmp)
        except OSError:
            pass
        raise


def current_umask() -> int:
    """The process's umask (read by setting it and putting it back: there is no getter before
    Python 3.13; no other thread writes files between the two calls in llmload)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


OWN, BESIDE, RELATIVE, IN_CWD = "own", "beside", "relative", "cwd"
"""Where a worker's copy of its rows goes (:func:`worker_copy_prefix`)."""


def directory_id(path: str) -> tuple[int, int] | None:
    """(device, inode) of a directory, None when it is not one: two processes that stat the same
    (device, inode) see one directory, on one host or on one shared disk."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino) if stat.S_ISDIR(st.st_mode) else None


def worker_copy_prefix(own: str | None, master: str | None, master_dir: str | None = None,
                       master_dir_id: tuple[int, int] | list[int] | None = None) -> tuple[str | None, str]:
    """Where a worker keeps its copy of its rows, and why: its own ``--csv`` (``own``); else beside
    the master's files, when the master's directory (``master_dir``, absolute) is the very directory
    this process sees there (the same device and inode: the same host, or a shared disk; ``beside``);
    else the master's relative path under this worker's working directory (``relative``); else (an
    absolute path, or one that climbs out with ``..``) the master's file name there (``cwd``). The
    master names a directory only this way, and the file's name always ends ``_requests.workerN.csv``."""
    if own:
        return own, OWN
    name = os.path.basename((master or "").rstrip("/\\")) if master else ""
    if not name or name in (".", ".."):
        return None, ""
    if master_dir and master_dir_id is not None and directory_id(master_dir) == tuple(master_dir_id):
        return os.path.join(master_dir, name), BESIDE
    rel = os.path.normpath(str(master))
    if not os.path.isabs(rel) and rel != ".." and not rel.startswith(".." + os.sep):
        return rel, RELATIVE
    return name, IN_CWD


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
