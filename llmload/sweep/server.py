"""A deployment's server for one cell: started from its serve: template in its own process group,
waited for (``/health`` or ``/v1/models`` answering 200), reset, and stopped with its whole group.
A ``host:`` deployment is only waited for and reset.

Usage::

    server = Server.start(variant, log_path="DIR/cells/ID/server.log")   # raises ServerError with the log tail
    server.url, server.alive()
    reset_server(server.url, "vllm")                                     # POST /reset_prefix_cache
    server.stop()                                                        # SIGTERM the group, SIGKILL after 10 s
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import time
import urllib.request
from dataclasses import dataclass

from llmload.server_metrics.engine_admin import reset_cache
from llmload.sweep.cells import Variant

STOP_GRACE_S = 10.0


class ServerError(RuntimeError):
    """The server did not start, or stopped: the message ends with its log's last lines."""


def free_port() -> int:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return port


def cannot_start(variant: Variant) -> str | None:
    """Why the deployment's serve: command cannot start here (its program is not on PATH, or not an
    executable file), else None. Checked for every deployment before the first cell: a plan whose
    server cannot start fails once, naming the command, instead of failing every cell the same way."""
    d = variant.deployment
    if d.serve is None:
        return None
    program = variant.command(0)[0]
    path = {**os.environ, **d.env}.get("PATH", os.defpath)
    if os.sep in program:
        if os.path.isfile(program) and os.access(program, os.X_OK):
            return None
        why = "no such file" if not os.path.exists(program) else "not an executable file"
    elif shutil.which(program, path=path):
        return None
    else:
        why = "no such command on PATH"
    return f"deployments.{d.name}.serve: cannot start {program!r} ({why}): {d.serve}"


def log_tail(path: str | None, lines: int = 15) -> str:
    if not path or not os.path.exists(path):
        return ""
    with open(path, "rb") as f:
        f.seek(max(0, os.path.getsize(path) - 8192))
        text = f.read().decode("utf-8", "replace")
    return "\n".join(text.splitlines()[-lines:])


def _answers(url: str, timeout: float = 2.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:  # noqa: S310 (the plan's own server)
            return r.status == 200
    except (OSError, ValueError):
        return False


@dataclass
class Server:
    url: str
    proc: subprocess.Popen | None = None  # None: a host: deployment, not ours to stop
    log_path: str | None = None
    name: str = "the server"  # in messages: "replica 1", "nginx"

    @classmethod
    def start(cls, variant: Variant, log_path: str) -> Server:
        d = variant.deployment
        if d.serve is None:
            assert d.host is not None
            server = cls(url=d.host.rstrip("/"))
            server.wait_healthy(d.health, d.start_timeout_s)
            return server
        port = free_port()
        server = cls.spawn(variant.command(port), {**d.env, **variant.env(port)}, log_path, f"http://127.0.0.1:{port}")
        try:
            server.wait_healthy(d.health, d.start_timeout_s)
        except ServerError:
            server.stop()
            raise
        return server

    @classmethod
    def spawn(cls, cmd: list[str], env: dict[str, str], log_path: str, url: str, name: str = "the server") -> Server:
        """Start ``cmd`` in its own process group, output to ``log_path``; not waited for."""
        log = open(log_path, "ab")  # noqa: SIM115 (the child holds it; closed below once it has it)
        try:
            proc = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                    env={**os.environ, **env}, start_new_session=True)
        except OSError as e:
            raise ServerError(f"cannot start {name} ({cmd[0]!r}): {e.strerror or e}") from None
        finally:
            log.close()
        return cls(url=url, proc=proc, log_path=log_path, name=name)

    def wait_healthy(self, path: str, timeout_s: float) -> None:
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.proc is not None and self.proc.poll() is not None:
                raise ServerError(f"{self.name} exited with code {self.proc.returncode} before it answered "
                                  f"{path}{self._tail()}")
            if _answers(self.url + path):
                return
            time.sleep(0.25)
        raise ServerError(f"{self.name}: {self.url}{path} did not answer 200 within {timeout_s:g} s (start_timeout_s)"
                          f"{self._tail()}")

    def alive(self) -> bool:
        return self.proc is None or self.proc.poll() is None

    def died_text(self) -> str:
        code = None if self.proc is None else self.proc.returncode
        return f"{self.name} stopped during the cell (exit code {code}){self._tail()}"

    def _tail(self) -> str:
        tail = log_tail(self.log_path)
        return f"; its log ({self.log_path}) ends:\n{tail}" if tail else ""

    def stop(self) -> None:
        """SIGTERM to the whole process group, SIGKILL to what is left after STOP_GRACE_S. A server
        that forks (a launcher script, vLLM's engine core) leaves no child behind."""
        if self.proc is None:
            return
        pgid = self.proc.pid  # start_new_session: the group is the leader's pid
        _signal_group(pgid, signal.SIGTERM)
        try:
            self.proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            pass
        deadline = time.monotonic() + STOP_GRACE_S
        while group_alive(pgid) and time.monotonic() < deadline:
            time.sleep(0.1)
        _signal_group(pgid, signal.SIGKILL)
        try:
            self.proc.wait(STOP_GRACE_S)
        except subprocess.TimeoutExpired:
            pass


def _signal_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def group_alive(pgid: int) -> bool:
    """Any process of the group still there (a zombie leader not counted)?"""
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
            except OSError:
                continue
            if int(fields[2]) == pgid and fields[0] != "Z":  # fields: state ppid pgrp
                return True
    return False


def reset_server(url: str, how: str, command: str | None = None, timeout_s: float = 60.0) -> str | None:
    """Empty the server's caches before a cell. None when done (or nothing to do), else what went
    wrong, for the cell's notes: a reset that fails does not fail the cell."""
    if how == "none":
        return None
    if how == "command":
        assert command is not None
        port = url.rsplit(":", 1)[-1]
        done = subprocess.run(command.format(url=url, port=port), shell=True, capture_output=True,  # noqa: S602
                              text=True, timeout=timeout_s)
        if done.returncode != 0:
            return f"reset command exited {done.returncode}: {(done.stderr or done.stdout).strip()[-300:]}"
        return None
    done = reset_cache(url, how, timeout_s)  # the same call as a run's --reset-cache (server_metrics.engine_admin)
    return None if done.ok else f"reset {how}: {done.error}"
