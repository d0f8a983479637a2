"""An --isolation run over two worker processes: each worker's own copy of its rows
(PREFIX_requests.workerN.csv, the run when the master is lost) carries the same isolation phases as
the master's file, but for requests that started within a message's latency of a phase's start."""

from __future__ import annotations

import pandas as pd

from tests.support.locust_runs import run_scenario
from tests.support.processes import free_port

SCENARIO = """
seed: 4
defaults: {ignore_eos: true, input_tokens: 20, output_tokens: 8}
workloads:
  interactive:
    priority: {class: high, value: 0}
  batch:
    priority: {class: low, value: 10}
"""


def test_workers_mark_the_isolation_phases_in_their_own_copies(mock_factory, tmp_path):
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "20", "--itl-ms", "5")
    port = str(free_port())
    master, _, prefix = run_scenario(tmp_path, mock, SCENARIO, "iso", "--isolation", "--isolation-users", "4",
                                     "--isolation-seconds", "4", "--processes", "2", "--master-port", port,
                                     "--master-bind-port", port, "--stop-timeout", "5", timeout=180)
    copies = pd.concat([pd.read_csv(p) for p in sorted(tmp_path.glob("iso_requests.worker*.csv"))])
    merged = master.merge(copies, on="request_id", suffixes=("", "_own"))
    assert len(merged) == len(master) == len(copies)
    assert set(master["phase"].dropna()) == {"alone:high", "alone:low", "together"}
    starts = master.groupby("phase")["start_time"].min().to_numpy()
    near = merged["start_time"].apply(lambda t: min(abs(t - s) for s in starts) < 1.0)  # a phase's start
    clear = merged[~near]
    assert len(clear) > len(merged) / 2
    mine, own = clear["phase"].fillna(""), clear["phase_own"].fillna("")
    assert (mine == own).all(), clear[mine != own][["start_time", "phase", "phase_own"]]
