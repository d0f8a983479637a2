"""Real `locust` processes and what they wrote: runs, rows, checks against the mock's log, reports."""

from __future__ import annotations

import glob
import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np
import pandas as pd

from llmload.metrics.record import NEVER_SENT
from tests.support.processes import ROOT, raise_priority

LOCUST = [sys.executable, "-m", "locust"]


CHAT = os.path.join(ROOT, "locustfiles", "chat.py")


def run_locust(args: list[str], cwd, timeout: float = 120, boosted: bool = False) -> subprocess.CompletedProcess:
    """A real Locust process (``boosted``: at a higher priority, see :func:`tests.conftest.raise_priority`)."""
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run([*LOCUST, *args], cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout,
                          preexec_fn=raise_priority if boosted else None)


SCENARIO_LOCUSTFILE = """
from llmload import users_from_scenario
globals().update(users_from_scenario({path!r}))
"""


def run_scenario(tmp_path, mock, yaml_text: str, name: str, *args: str, timeout: float = 120, boosted: bool = False):
    """A headless run of a scenario file written from ``yaml_text``: (rows, output, prefix);
    ``boosted``: Locust at a higher priority (a test of its timing, see :func:`run_locust`)."""
    scen = tmp_path / f"{name}.yaml"
    scen.write_text(textwrap.dedent(yaml_text))
    lf = tmp_path / f"{name}_locustfile.py"
    lf.write_text(SCENARIO_LOCUSTFILE.format(path=str(scen)))
    prefix = tmp_path / name
    res = run_locust(["-f", str(lf), "--host", mock.url, "--headless", "--csv", str(prefix), *args], tmp_path,
                     timeout=timeout, boosted=boosted)
    assert res.returncode == 0, res.stderr[-3000:]
    return load_rows(prefix), res.stdout + res.stderr, prefix


def load_rows(prefix) -> pd.DataFrame:
    return pd.read_csv(f"{prefix}_requests.csv", keep_default_na=False, na_values=[""], dtype={"request_id": str})


def _missing(rows: pd.DataFrame, log: dict, prefix) -> str:
    """Which requests are missing where: the server's entry of each request without a row, and whether a
    worker's own copy of its rows (PREFIX_requests.workerN.csv) has it (then it was lost on the way)."""
    ids = set(rows["request_id"])
    copies = {}
    for path in sorted(glob.glob(f"{prefix}_requests.worker*.csv")) if prefix is not None else ():
        copies[os.path.basename(path)] = set(load_rows_file(path)["request_id"])
    said = []
    for rid in sorted(set(log) - ids):
        e = log[rid]
        where = [name for name, have in copies.items() if rid in have] or ["no worker's copy"]
        said.append(f"{rid} (server: {e.get('outcome')}, {e.get('tokens_sent')} tokens; in {', '.join(where)})")
    extra = sorted(ids - set(log))
    return f"no row for {said}; rows the server never saw: {extra}"


def load_rows_file(path) -> pd.DataFrame:
    return pd.read_csv(path, keep_default_na=False, na_values=[""], dtype={"request_id": str})


def check_against_log(rows: pd.DataFrame, mock, expect_users: int, prefix=None) -> None:
    unsent = rows["error"] == NEVER_SENT  # a user stopped at the end while it (re)connected: no server saw it
    assert (rows.loc[unsent, "status"] == "cancelled").all()
    rows = rows[~unsent]
    log = mock.log_by_id(expect=len(rows))
    assert len(rows) == len(log) and set(rows["request_id"]) == set(log), \
        f"{len(rows)} rows for {len(log)} requests the server saw: " + _missing(rows, log, prefix)
    completed = {rid for rid, e in log.items() if e["outcome"] == "completed"}
    ok = rows[rows["status"] == "ok"]
    assert set(ok["request_id"]) == completed
    assert set(rows["status"]) <= {"ok", "cancelled"}
    assert len(ok), f"no request of the run completed: {rows['status'].value_counts().to_dict()}"
    ttft_diff, tpot_diff = [], []
    for r in ok.itertuples():
        e = log[r.request_id]
        assert r.completion_tokens == e["tokens_sent"] and r.prompt_tokens == e["prompt_tokens"]
        true_tpot = (e["last_token_mono"] - e["first_token_mono"]) * 1000 / (e["tokens_sent"] - 1)
        tpot_diff.append(abs(r.tpot_ms - true_tpot))
        ttft_diff.append(r.ttft_ms - (e["first_token_mono"] - e["arrival_mono"]) * 1000)
    # Never shorter than the truth; the difference is the request's trip to the server, where
    # an OS that deschedules a process between taking a time and writing (up to 5 processes on
    # 2 cores here, the mock among them) shows up now and then: bound the bulk, not the rare
    # outlier. tests below hold the client to 1 ms at p99 on a machine that is not oversubscribed.
    assert min(ttft_diff) > -0.5
    assert np.percentile(ttft_diff, 50) < 3.0 and np.percentile(ttft_diff, 90) < 20.0
    assert np.percentile(tpot_diff, 50) < 0.1 and np.percentile(tpot_diff, 95) < 1.0
    assert rows["users"].max() == expect_users
    assert (ok["token_source"] == "usage").all()


SYNTHETIC = os.path.join(ROOT, "locustfiles", "steps.py")


def run(args: list[str], cwd, timeout: float = 60) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": ROOT}
    return subprocess.run(args, cwd=cwd, env=env, capture_output=True, text=True, timeout=timeout)


@contextmanager
def explained(res: subprocess.CompletedProcess, keep_as) -> Iterator[None]:
    """On a failed check inside: the run's whole output kept in file ``keep_as``, and the lines of
    llmload's own in the failure's message (with ``--processes`` the workers write to the master's
    output: a written-off worker, a stop that failed, a row without a request say so there)."""
    try:
        yield
    except AssertionError as e:
        text = res.stdout + res.stderr
        with open(keep_as, "w") as f:
            f.write(text)
        said = [line for line in text.splitlines() if "llmload" in line or "LOST" in line]
        raise AssertionError(f"{e}\n--- the run's llmload lines (whole output: {keep_as}) ---\n" +
                             "\n".join(said[-80:])) from e


def llmload_lines(res: subprocess.CompletedProcess) -> list[str]:
    return [line for line in (res.stdout + res.stderr).splitlines() if line.startswith("llmload: ")]


KNOWN_CAPACITY_MOCK = ("--profile", "llama3-70b-2xa100", "--max-num-seqs", "16", "--step-base-ms", "20",
                       "--step-per-seq-ms", "0", "--step-per-prefill-token-ms", "0", "--step-per-context-token-ms",
                       "0", "--api-overhead-ms", "0", "--kv-capacity-tokens", "10000000")


def report(prefix, tmp_path, *slo: str, args: tuple[str, ...] = ()) -> dict:
    out = tmp_path / "report"
    rep = subprocess.run([sys.executable, "-m", "llmload.cli", "report", str(prefix), "--warmup-s", "2",
                          *[a for s in slo for a in ("--slo", s)], *args, "--out", str(out)],
                         capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert rep.returncode == 0, rep.stderr
    data = json.loads((out / "report.json").read_text())
    data["_md"] = (out / "report.md").read_text()
    return data
