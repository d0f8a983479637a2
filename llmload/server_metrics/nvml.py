"""The load machine's own GPUs, read through NVML (``nvidia-ml-py``, the ``gpu`` extra), as a
body in dcgm-exporter's format: ``--gpu-metrics nvml`` then goes through the same reader, CSV and
report as an exporter's ``/metrics``, with the same field names and labels.

NVML has no profiling (DCP) ratios, so an NVML reading has utilisation, memory, power, the energy
counter, the SM clock, the temperature and the clock-event bitmask, but no SM/DRAM/tensor
activity: the bound-by verdict is then ``underused`` or ``unknown`` (see gpu_window). A field a GPU
does not support is left out.

Usage::

    body = nvml_body()            # bytes, or NvmlUnavailable("no NVIDIA driver ...")
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from typing import Any


class NvmlUnavailable(Exception):
    """No NVML here (the extra is not installed, or there is no NVIDIA driver or GPU)."""


# (DCGM field, Prometheus type, help, how to read it from NVML: (pynvml, handle) → value)
def _fields(nv: Any) -> list[tuple[str, str, str, Callable[[Any], float]]]:
    events = getattr(nv, "nvmlDeviceGetCurrentClocksEventReasons", None) or nv.nvmlDeviceGetCurrentClocksThrottleReasons
    return [
        ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).",
         lambda h: nv.nvmlDeviceGetClockInfo(h, nv.NVML_CLOCK_SM)),
        ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).",
         lambda h: nv.nvmlDeviceGetTemperature(h, nv.NVML_TEMPERATURE_GPU)),
        ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", lambda h: nv.nvmlDeviceGetPowerUsage(h) / 1000.0),
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).",
         nv.nvmlDeviceGetTotalEnergyConsumption),
        ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", lambda h: nv.nvmlDeviceGetUtilizationRates(h).gpu),
        ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).",
         lambda h: nv.nvmlDeviceGetMemoryInfo(h).free // (1 << 20)),
        ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).",
         lambda h: nv.nvmlDeviceGetMemoryInfo(h).used // (1 << 20)),
        ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", "Current clock event reasons (bitmask).", events),
    ]


def _text(v: Any) -> str:
    return v.decode() if isinstance(v, bytes) else str(v)


def _number(v: float) -> str:
    return f"{v:f}" if isinstance(v, float) and not v.is_integer() else f"{int(v):d}"


def nvml_body(nv: Any = None, hostname: str | None = None) -> bytes:
    """Every GPU NVML sees, one line per field in dcgm-exporter's shape; ``nv`` is the ``pynvml``
    module (tests pass a fake)."""
    if nv is None:
        try:
            import pynvml as nv
        except ImportError:
            raise NvmlUnavailable("nvidia-ml-py is not installed (pip install 'llmload[gpu]')") from None
    try:
        nv.nvmlInit()
    except nv.NVMLError as e:
        raise NvmlUnavailable(f"NVML: {e} (no NVIDIA driver or GPU on this machine?)") from None
    host = hostname or socket.gethostname()
    try:
        devices = []
        for i in range(nv.nvmlDeviceGetCount()):
            h = nv.nvmlDeviceGetHandleByIndex(i)
            labels = (f'gpu="{i}",UUID="{_text(nv.nvmlDeviceGetUUID(h))}",'
                      f'pci_bus_id="{_text(nv.nvmlDeviceGetPciInfo(h).busId)}",device="nvidia{i}",'
                      f'modelName="{_text(nv.nvmlDeviceGetName(h))}",hostname="{host}"')
            devices.append((h, labels))
        lines = []
        for name, kind, help_text, read in _fields(nv):
            values = []
            for h, labels in devices:
                try:
                    values.append(f"{name}{{{labels}}} {_number(read(h))}")
                except nv.NVMLError:  # not supported by this GPU: left out, as DCGM's blank is
                    continue
            if values:
                lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}", *values]
    finally:
        nv.nvmlShutdown()
    return ("\n".join(lines) + "\n").encode()
