"""Network-namespace topologies for multi-host runs."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import pytest

from tests.support.netns import NetnsUnavailable, Topology

PY = sys.executable


MOCK_PORT = 8000  # every host has its own port space: no free-port dance


MASTER_PORT = 5557


@contextmanager
def topology(hosts: Sequence[str], tmp_path) -> Iterator[Topology]:
    topo = Topology(hosts, log_dir=str(tmp_path))
    try:
        topo.start()
    except NetnsUnavailable as e:
        pytest.skip(f"network namespaces unavailable: {e}")
    try:
        yield topo
    finally:
        topo.close()


def read_log(proc: subprocess.Popen) -> str:
    with open(proc.log_path, errors="replace") as f:
        return f.read()
