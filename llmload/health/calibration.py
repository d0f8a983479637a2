"""The result of ``llmload calibrate``: how much one llmload process on this machine can drive
while its timing stays within the user's tolerances, and the curve of the client's own signals
(loop lag, stall CPU, coalesced-read share) where they held. Written as JSON by
:mod:`llmload.calibrate.command`; read by the client-limited verdict (:mod:`llmload.health.verdict`)
when it exists for this host.

A version 1 file (a limit without a curve) is still read: one warning, and the verdict uses its
token rate alone, as it did.

Usage::

    cal = load_calibration()                    # --calibration / LLMLOAD_CALIBRATION, else the default path
    if cal is not None and cal.exceeded_by(tps=52_000, streams=1_100): ...
    cal.signals_over({"lag_p90_ms": 21.0, "stall_cpu_max_ms": 30.0, "streams": 64})  # {"lag_p90_ms": "event-loop ..."}
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

VERSION = 2
READABLE_VERSIONS = (1, 2)
MAX_BYTES = 1 << 20

# The signals the live verdict holds against the curve: (sample key, curve key, label, floor). The
# allowance at a load is MARGIN × the highest value the in-tolerance points up to that load showed,
# and never below the floor: on a shared machine a quiet step's 1-ms lag is not a bar to hold. The
# interval's lag p90 is held against the curve's worst p99: a sustained lag, not one stall (users
# starting, a collector pass), which shows in the stall CPU alone.
SIGNALS = (("lag_p90_ms", "lag_p99_ms", "event-loop lag p90", 5.0),
           ("stall_cpu_max_ms", "stall_cpu_max_ms", "stall CPU", 5.0),
           ("coalesced_share", "coalesced_share", "coalesced-read share", 0.02))
MARGIN = 1.5


def default_path() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "llmload", "calibration.json")


@dataclass(frozen=True)
class CurvePoint:
    """One calibrated stream count: did it stay in tolerance, and the client's signals there."""

    streams: int
    tps: float
    ok: bool
    signals: dict[str, float | None]


@dataclass(frozen=True)
class Calibration:
    """Per process: the highest token rate and stream count within the tolerances, and the curve."""

    host: str
    max_tps: float
    max_streams: int
    limit_found: bool  # False: the climb never failed, so the maxima are lower bounds
    path: str = ""
    version: int = VERSION
    tolerance: str = ""  # the tolerances, in words: what "within" means
    curve: tuple[CurvePoint, ...] = ()

    def exceeded_by(self, tps: float | None, streams: int | None) -> bool:
        """Above the calibrated token rate (only when the climb found a limit)."""
        return self.limit_found and tps is not None and tps > self.max_tps

    def allowance(self, streams: int | None) -> dict[str, float]:
        """What the curve allows each signal at ``streams`` per process (see SIGNALS); {} without a curve."""
        good = sorted((p for p in self.curve if p.ok), key=lambda p: p.streams)
        if not good:
            return {}
        load = streams or 0
        upto = next((p.streams for p in good if p.streams >= load), good[-1].streams)
        out = {}
        for key, curve_key, _, floor in SIGNALS:
            seen = [v for p in good if p.streams <= upto and (v := p.signals.get(curve_key)) is not None]
            out[key] = max(MARGIN * max(seen, default=0.0), floor)
        return out

    def signals_over(self, sample: dict[str, Any]) -> dict[str, str]:
        """The sample's signals above what the curve allows at its load (sample key → in words), when
        they say the timing left the tolerances: the coalesced-read share alone (it is the loss
        itself: gaps that cannot be known), or any two of the three (one stall alone raises the stall
        CPU only). {} when not."""
        allowed = self.allowance(sample.get("streams"))
        over: dict[str, str] = {}
        for key, _, label, _ in SIGNALS:
            v = sample.get(key)
            if key in allowed and v is not None and v > allowed[key]:
                fmt = (lambda x: f"{x * 100:.1f} %") if key == "coalesced_share" else (lambda x: f"{x:.1f} ms")
                over[key] = f"{label} {fmt(v)} > {fmt(allowed[key])}"
        return over if "coalesced_share" in over or len(over) >= 2 else {}


def _curve(data: dict[str, Any]) -> tuple[CurvePoint, ...]:
    points = []
    for n, p in enumerate(data.get("curve") or []):
        try:
            points.append(CurvePoint(streams=int(p["streams"]), tps=float(p.get("tps_per_process") or 0.0),
                                     ok=bool(p["ok"]), signals={k: (None if p.get(k) is None else float(p[k]))
                                                                for _, k, _, _ in SIGNALS}))
        except KeyError as e:
            raise ValueError(f"curve[{n}]: missing key {e}") from None
    return tuple(points)


def from_dict(data: dict[str, Any], path: str = "") -> Calibration:
    """The part of a calibration file the verdict needs; ValueError naming the key when it is not there."""
    try:
        version = data.get("version")
        if version not in READABLE_VERSIONS:
            raise ValueError(f"version: expected one of {', '.join(map(str, READABLE_VERSIONS))}, got {version!r}")
        per = data["per_process"]
        return Calibration(host=str(data["host"]), max_tps=float(per["max_tps"]), max_streams=int(per["max_streams"]),
                           limit_found=bool(per["limit_found"]), path=path, version=int(version),
                           tolerance=str(data.get("tolerance") or ""), curve=_curve(data) if version >= 2 else ())
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
    if cal.version < VERSION:
        log.warning("llmload: calibration %s is version %d (a limit without a curve): only its %.0f tok/s per "
                    "process is used; run `llmload calibrate` again for the curve", path, cal.version, cal.max_tps)
    return cal


def save_calibration(result: dict[str, Any], path: str) -> None:
    from_dict(result)  # never write a file the reader would reject
    files.replace_atomically(path, json.dumps(result, indent=2) + "\n")
