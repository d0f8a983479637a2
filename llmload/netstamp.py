"""Kernel receive timestamps (``SO_TIMESTAMPNS``): when bytes reached this machine, not when a
busy loop got round to reading them. Shared by the client's reader and the mock's request side.

Usage::

    enabled = enable(sock)                              # False where the kernel has no such option
    data, anc, _flags, _addr = sock.recvmsg(65536, ANC_SIZE)
    t = stamp(anc, clock_offset())                      # on the perf_counter clock, or None
"""

from __future__ import annotations

import socket
import struct
import sys
import time
from time import perf_counter

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform.startswith("linux") else 0)
TIMESPEC = struct.Struct("@ll")  # struct timespec
ANC_SIZE = socket.CMSG_SPACE(TIMESPEC.size)


# Reading the two clocks closer together than this gives an offset good to a few µs.
_OFFSET_WINDOW_S = 50e-6
_last_offset: float | None = None


def clock_offset() -> float:
    """``time.time() - perf_counter()``, read so that a preemption between the two reads cannot
    skew it: a reading whose two perf_counter() calls lie too far apart is taken again, and if
    the process keeps being interrupted the last good offset is used. (One skewed offset would
    shift every timestamp of a read pass by the length of the preemption.)"""
    global _last_offset
    for _ in range(3):
        a = perf_counter()
        r = time.time()
        b = perf_counter()
        if b - a < _OFFSET_WINDOW_S:
            _last_offset = r - (a + b) * 0.5
            return _last_offset
    return _last_offset if _last_offset is not None else r - b


def enable(sock: socket.socket) -> bool:
    """Ask the kernel to stamp every read of ``sock``; False when it cannot."""
    if not SO_TIMESTAMPNS:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
        return True
    except OSError:
        return False


def stamp(anc: list, clock_offset: float) -> float | None:
    """The receive time in ``anc`` (CLOCK_REALTIME) on the perf_counter clock, given
    :func:`clock_offset`; None when the read carried no stamp."""
    if not anc:
        return None
    sec, nsec = TIMESPEC.unpack_from(anc[0][2])
    return sec - clock_offset + nsec * 1e-9
