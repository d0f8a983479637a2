"""The result of ``llmload calibrate``: how much one llmload process on this machine can drive
before its own timing goes wrong. Written as JSON by :mod:`llmload.calibrate.command`; read by the
client-limited verdict (:mod:`llmload.health.verdict`) when it exists for this host.

Usage::

    cal = load_calibration()                    # --calibration / LLMLOAD_CALIBRATION, else the default path
    if cal is not None and cal.exceeded_by(tps=52_000, streams=1_100): ...
    save_calibration(result_dict, path)
"""

from __future__ import annotations

import json
import logging
import os
import socket
import stat
from dataclasses import dataclass
from typing import Any

from llmload import files

log = logging.getLogger("llmload")

VERSION = 1
MAX_BYTES = 1 << 20


def default_path() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "llmload", "calibration.json")


@dataclass(frozen=True)
class Calibration:
    """Per process: the highest token rate and stream count that stayed exact."""

    host: str
    max_tps: float
    max_streams: int
    limit_found: bool  # False: the climb never failed, so the maxima are lower bounds
    path: str = ""

    def exceeded_by(self, tps: float | None, streams: int | None) -> bool:
        """Above the calibrated token rate (only when the climb found a limit)."""
        return self.limit_found and tps is not None and tps > self.max_tps


def from_dict(data: dict[str, Any], path: str = "") -> Calibration:
    """The part of a calibration file the verdict needs; ValueError naming the key when it is not there."""
    try:
        if data.get("version") != VERSION:
            raise ValueError(f"version: expected {VERSION}, got {data.get('version')!r}")
        per = data["per_process"]
        return Calibration(host=str(data["host"]), max_tps=float(per["max_tps"]), max_streams=int(per["max_streams"]),
                           limit_found=bool(per["limit_found"]), path=path)
    except KeyError as e:
        raise ValueError(f"missing key {e}") from None
    except (TypeError, AttributeError) as e:
        raise ValueError(f"unexpected shape: {e}") from None


def load_calibration(path: str | None = None) -> Calibration | None:
    """This host's calibration, or None (no file, another host's, or unreadable: logged once)."""
    path = path or os.environ.get("LLMLOAD_CALIBRATION") or default_path()
    try:
        # a calibration is a page of JSON: /dev/zero, a FIFO (whose open would wait for a writer) or a
        # huge file is refused, never read
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            raise ValueError("not a regular file")
        if st.st_size > MAX_BYTES:
            raise ValueError(f"{st.st_size:,} bytes is larger than a calibration ({MAX_BYTES:,} at most)")
        with open(path, encoding="utf-8") as f:
            cal = from_dict(json.loads(f.read(MAX_BYTES + 1)), path)
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as e:  # json.JSONDecodeError is a ValueError
        log.warning("llmload: ignoring the calibration %s: %s", path, e)
        return None
    if cal.host != socket.gethostname():
        log.info("llmload: calibration %s is for host %s, not this one; not used", path, cal.host)
        return None
    return cal


def save_calibration(result: dict[str, Any], path: str) -> None:
    from_dict(result)  # never write a file the reader would reject
    files.replace_atomically(path, json.dumps(result, indent=2) + "\n")
