"""Kernel timestamps: when bytes reached this machine (``SO_TIMESTAMPNS``) and when the kernel
sent ours (``SO_TIMESTAMPING``, software transmit stamps), not when a busy loop got round to them.
Shared by the client (its reader, its t0) and the mock (request arrival, token send times).

Usage::

    enabled = enable(sock)                              # receive stamps; False where the kernel has none
    data, anc, _flags, _addr = sock.recvmsg(65536, ANC_SIZE)
    t = stamp(anc, clock_offset())                      # on the perf_counter clock, or None
    enable_tx(sock); sock.sendall(data)
    t_sent = sent_at(sock, clock_offset())              # when the kernel sent it, or None
"""

from __future__ import annotations

import socket
import struct
import sys
import time
from time import perf_counter

SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform.startswith("linux") else 0)
SO_TIMESTAMPING = 37 if sys.platform.startswith("linux") else 0
# SOF_TIMESTAMPING_TX_SOFTWARE | _SOFTWARE | _OPT_TSONLY: a stamp per send, without the payload
_TX_FLAGS = (1 << 1) | (1 << 4) | (1 << 11)
_ERRQUEUE_FLAGS = socket.MSG_ERRQUEUE | socket.MSG_DONTWAIT if hasattr(socket, "MSG_ERRQUEUE") else 0
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


def enable_tx(sock: socket.socket) -> bool:
    """Ask the kernel for a software timestamp of every send on ``sock`` (read with :func:`sent_at`)."""
    if not SO_TIMESTAMPING or not _ERRQUEUE_FLAGS:
        return False
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, _TX_FLAGS)
        return True
    except OSError:
        return False


def sent_at(sock: socket.socket, clock_offset: float) -> float | None:
    """The earliest transmit stamp waiting in ``sock``'s error queue (it is drained), on the
    perf_counter clock; None when the kernel has none (yet). Never blocks."""
    first = None
    for _ in range(64):
        try:
            _data, anc, _flags, _addr = sock.recvmsg(0, 512, _ERRQUEUE_FLAGS)
        except (BlockingIOError, InterruptedError):
            break
        except OSError:
            break
        for level, kind, data in anc:
            if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPING and len(data) >= TIMESPEC.size:
                sec, nsec = TIMESPEC.unpack_from(data)
                t = sec - clock_offset + nsec * 1e-9
                if first is None or t < first:
                    first = t
    return first


def send_stamped(sock: socket.socket, data: bytes) -> tuple[int, float | None]:
    """``sock.send(data)`` (non-blocking) and the kernel's transmit time of it, on the perf_counter
    clock (None where there is none): stamping is switched on for this one send only, so no stamp
    is left to pile up in the error queue."""
    if not enable_tx(sock):
        return sock.send(data), None
    try:
        n = sock.send(data)
        return n, sent_at(sock, clock_offset()) if n else None
    finally:
        try:
            sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPING, 0)
        except OSError:
            pass
