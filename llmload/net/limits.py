"""The operating system's limits a big run meets, each said once, with how to raise it.

* Open files: every user holds one connection (one descriptor). ``raise_fd_limit`` lifts the
  soft limit to the hard one at init (allowed without privileges); ``check_fd_budget`` says once
  when a process's users will not fit, naming the limit and how to raise it.
* Ephemeral ports: every connection to one server address takes a local port from
  ``net.ipv4.ip_local_port_range``; when they run out, connecting fails with EADDRNOTAVAIL,
  reported as exhaustion, not as an unreachable server.

Usage::

    soft, hard = raise_fd_limit()
    check_fd_budget(users=5000)            # logs one error when 5000 users cannot have a socket each
    explain_connect_error(OSError(errno.EMFILE, "Too many open files"))   # the text for the row
"""

from __future__ import annotations

import errno
import logging

log = logging.getLogger("llmload")

FD_RESERVE = 64  # descriptors a Locust process uses besides its users' sockets
_said: set[str] = set()


def fd_limits() -> tuple[int, int]:
    try:
        import resource

        return resource.getrlimit(resource.RLIMIT_NOFILE)
    except (ImportError, OSError, ValueError):
        return -1, -1


def raise_fd_limit() -> tuple[int, int]:
    """Soft open-files limit up to the hard one; returns (soft, hard) as they are now."""
    soft, hard = fd_limits()
    if 0 <= soft < hard or (soft >= 0 and hard < 0):
        try:
            import resource

            resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))
        except (ImportError, OSError, ValueError):
            pass
    return fd_limits()


def how_to_raise_fds(soft: int, hard: int) -> str:
    return (f"the open-files limit is {soft} (hard limit {hard}): raise it with `ulimit -n 65536` in the shell "
            "that starts Locust (hard limit: /etc/security/limits.conf, LimitNOFILE= in a systemd unit, "
            "`docker run --ulimit nofile=65536:65536`), or spread the users over more worker processes")


_checked_up_to = 0


def check_fd_budget(users: int) -> bool:
    """False (and one logged error) when ``users`` connections cannot all be open in this process.
    Cheap after the first call: only a new high of ``users`` is checked."""
    global _checked_up_to
    if users <= _checked_up_to:
        return True
    soft, hard = fd_limits()
    if soft < 0 or users + FD_RESERVE <= soft:
        _checked_up_to = users
        return True
    _checked_up_to = 1 << 62  # said once
    _once("fd", f"llmload: {users} users in this process need about {users + FD_RESERVE} open files, but "
                + how_to_raise_fds(soft, hard))
    return False


def port_range() -> tuple[int, int] | None:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
        return lo, hi
    except (OSError, ValueError):
        return None


def explain_connect_error(e: BaseException) -> str:
    """What a failed connect means, in the row's error text; resource exhaustion is also logged once."""
    code = getattr(e, "errno", None)
    if code in (errno.EMFILE, errno.ENFILE):
        soft, hard = fd_limits()
        text = "out of file descriptors: " + how_to_raise_fds(soft, hard)
        _once("fd-hit", "llmload: " + text)
        return text
    if code == errno.EADDRNOTAVAIL:
        rng = port_range()
        ports = f"ports {rng[0]}-{rng[1]}, {rng[1] - rng[0] + 1} per server address" if rng else "ports"
        text = (f"ephemeral ports exhausted (EADDRNOTAVAIL: every local {ports} in use or in TIME_WAIT): widen "
                "net.ipv4.ip_local_port_range (sysctl -w net.ipv4.ip_local_port_range='1024 65535'), keep "
                "connections alive, or spread workers over more machines or source addresses")
        _once("ports", "llmload: " + text)
        return text
    return str(e)


def _once(key: str, message: str) -> None:
    if key not in _said:
        _said.add(key)
        log.error(message)
