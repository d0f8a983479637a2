"""llmload.server_metrics.nvml: this machine's GPUs through NVML, as dcgm-exporter's format, read
back by the same DCGM reader. A fake pynvml stands in for the driver."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from llmload.server_metrics import parse_exposition
from llmload.server_metrics.gpu import gpu_readings, gpu_samples
from llmload.server_metrics.nvml import NvmlUnavailable, nvml_body


class FakeNvml:
    NVML_CLOCK_SM, NVML_TEMPERATURE_GPU = 1, 0

    class NVMLError(Exception):
        pass

    def __init__(self, gpus: int = 2, init_fails: bool = False) -> None:
        self.gpus, self.init_fails, self.shut = gpus, init_fails, False

    def nvmlInit(self):
        if self.init_fails:
            raise self.NVMLError("NVML Shared Library Not Found")

    def nvmlShutdown(self):
        self.shut = True

    def nvmlDeviceGetCount(self):
        return self.gpus

    def nvmlDeviceGetHandleByIndex(self, i):
        return i

    def nvmlDeviceGetUUID(self, h):
        return f"GPU-local-{h}"

    def nvmlDeviceGetName(self, h):
        return b"NVIDIA L4"

    def nvmlDeviceGetPciInfo(self, h):
        return SimpleNamespace(busId=f"00000000:0{h}:00.0")

    def nvmlDeviceGetClockInfo(self, h, clock):
        return 2040

    def nvmlDeviceGetTemperature(self, h, sensor):
        return 55

    def nvmlDeviceGetPowerUsage(self, h):
        return 61_250  # mW

    def nvmlDeviceGetTotalEnergyConsumption(self, h):
        return 123_456_789 + h

    def nvmlDeviceGetUtilizationRates(self, h):
        return SimpleNamespace(gpu=87)

    def nvmlDeviceGetMemoryInfo(self, h):
        return SimpleNamespace(free=2 << 30, used=20 << 30)

    def nvmlDeviceGetCurrentClocksEventReasons(self, h):
        if h == 1:
            raise self.NVMLError("Not Supported")
        return 0x4


def test_nvml_gpus_read_as_dcgm_fields():
    nv = FakeNvml()
    readings, who = gpu_readings(gpu_samples(parse_exposition(nvml_body(nv, hostname="loadgen"))))
    assert nv.shut and set(readings) == {"GPU-local-0", "GPU-local-1"}
    r = readings["GPU-local-0"]
    assert r["power_w"] == pytest.approx(61.25) and r["energy_mj"] == 123_456_789
    assert (r["util"], r["fb_used_mib"], r["fb_free_mib"]) == (pytest.approx(0.87), 20 * 1024, 2 * 1024)
    assert (r["sm_clock_mhz"], r["temp_c"], r["clock_event_reasons"]) == (2040, 55, 4)
    assert "clock_event_reasons" not in readings["GPU-local-1"]  # not supported: left out
    assert (who["GPU-local-1"].model, who["GPU-local-1"].hostname) == ("NVIDIA L4", "loadgen")


def test_no_nvml_is_one_clear_reason():
    with pytest.raises(NvmlUnavailable, match="no NVIDIA driver or GPU"):
        nvml_body(FakeNvml(init_fails=True))
