"""A free TCP port of 127.0.0.1, for a child process that must be told its port before it starts
(a Locust master and its ``--processes`` workers: Locust's default 5557 would clash with any other run
on the machine)."""

from __future__ import annotations

import socket


def free_port() -> int:
    """A port nothing listens on right now (the kernel's pick for port 0)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
