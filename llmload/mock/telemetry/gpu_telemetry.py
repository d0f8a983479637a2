"""The mock's simulated GPUs: a power and activity model fed by the engine's steps, and its
``/dcgm/metrics`` in dcgm-exporter's shape. Pure: times are passed in.

**Power.** Each of ``gpus`` GPUs draws ``idle_w`` all the time; on top, every prefill token
costs ``j_per_prefill_token`` and every decode token ``j_per_decode_token`` (joules for the
whole replica, shared evenly by its GPUs, spread over the step that computes it). The energy
counter ``DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION`` (mJ, an integer, as DCGM's) is that integral
from the mock's start plus a per-GPU "since boot" offset; ``DCGM_FI_DEV_POWER_USAGE`` is the mean
power since the previous scrape. The exact totals are exposed too, as
``llmload_mock:gpu_energy_joules_total`` (every GPU), ``llmload_mock:gpu_tokens_total{phase}``
and ``llmload_mock:gpu_output_tokens_total`` (counted when a step ends, as the engine emits
them), so a test can hold llmload's J/token against them.

**Activity** follows the steps' token mix. A step whose tokens are a share *f* prefill (prefill
tokens ÷ all its tokens, a decode counting one) is, for its duration, DRAM active ``0.85 (1 − f)
+ 0.30 f``, tensor active ``0.15 (1 − f) + 0.75 f`` and SM active ``0.70 (1 − f) + 0.95 f``;
between steps the GPU is idle (0). Each scrape reports the time-weighted mean since the previous
one, and ``DCGM_FI_DEV_GPU_UTIL`` the share of that time a step ran. A decode-heavy load is then
memory-bandwidth-bound, a prefill-heavy one compute-bound, a light one underused.

**Throttling** (``throttle``: start and length in seconds after the mock's first completion
request, so a test can place it in a load step; :meth:`GpuMeter.load_started`): while it lasts
the clock-event bitmask says SW power cap (0x4), the SM clock drops from 1,980 to 1,410 MHz, the
power-violation counter grows by the throttled nanoseconds, and each step takes ``SLOWDOWN``
(1,980 / 1,410) times longer.

Memory used is what vLLM allocates at start (``gpu_memory_utilization`` 0.9 of an 80 GB H100),
constant. The fixed engine has no steps: its GPUs draw ``idle_w`` only.

Usage::

    meter = GpuMeter(GpuModel(gpus=2), t0=perf_counter())
    engine.gpu = meter                                  # the batching engine calls on_step
    text = render_dcgm(meter, perf_counter(), hostname="mock")
"""

from __future__ import annotations

from dataclasses import dataclass

FB_TOTAL_MIB = 81559  # an H100 80GB HBM3's framebuffer
FB_USED_MIB = int(FB_TOTAL_MIB * 0.9)  # vLLM's gpu_memory_utilization default
BOOT_ENERGY_MJ = 3_600_000_000  # "since boot": an hour at 1 kW before the mock started
MAX_SM_CLOCK, THROTTLED_SM_CLOCK = 1980, 1410
SLOWDOWN = MAX_SM_CLOCK / THROTTLED_SM_CLOCK
POWER_CAP, IDLE_REASON = 0x4, 0x1
DECODE = {"dram": 0.85, "tensor": 0.15, "sm": 0.70}
PREFILL = {"dram": 0.30, "tensor": 0.75, "sm": 0.95}


@dataclass(frozen=True)
class GpuModel:
    """The simulated GPUs (``llmload mock --gpus ... --gpu-*``)."""

    gpus: int = 1
    idle_w: float = 75.0
    j_per_prefill_token: float = 0.004  # the default profile prefills ~100k tokens/s: ~400 W
    j_per_decode_token: float = 0.1
    throttle: tuple[float, float] | None = None
    """(start, seconds) after the first completion request; None: never."""
    model_name: str = "NVIDIA H100 80GB HBM3"

    def validate(self) -> None:
        if self.gpus < 1:
            raise ValueError(f"--gpus {self.gpus}: expected a whole number >= 1")
        for flag, value in (("--gpu-idle-w", self.idle_w), ("--gpu-j-per-prefill-token", self.j_per_prefill_token),
                            ("--gpu-j-per-decode-token", self.j_per_decode_token)):
            if not value >= 0:
                raise ValueError(f"{flag} {value}: expected a number >= 0")


def parse_throttle(text: str) -> tuple[float, float]:
    """``START:SECONDS`` → (start, seconds), for ``--gpu-throttle``."""
    start, sep, length = text.partition(":")
    try:
        window = float(start), float(length)
    except ValueError:
        window = (-1.0, -1.0)
    if not sep or window[0] < 0 or window[1] <= 0:
        raise ValueError(f"--gpu-throttle {text!r}: expected START:SECONDS after the first request, e.g. 30:20")
    return window


class GpuMeter:
    """Energy and activity totals of the simulated GPUs (see the module docstring)."""

    def __init__(self, model: GpuModel, t0: float) -> None:
        model.validate()
        self.model = model
        self.t0 = t0
        self.load_t0: float | None = None  # the first completion request: the throttle window's origin
        self.prefill_tokens = 0
        self.decode_tokens = 0
        self._output_tokens = 0  # of finished steps: a decode, or a prefill chunk that ends its prompt
        self._token_j = 0.0  # energy of finished steps' tokens (all GPUs)
        self._busy: dict[str, float] = {"busy": 0.0, "dram": 0.0, "tensor": 0.0, "sm": 0.0}  # finished steps
        # the running step: start, length, token J, activity, output tokens
        self._step: tuple[float, float, float, dict[str, float], int] | None = None
        self._last_scrape: tuple[float, float, dict[str, float]] | None = None  # time, energy J, busy totals

    # -- fed by the engine -----------------------------------------------------------------
    def load_started(self, now: float) -> None:
        """A completion request arrived (the first one starts the throttle clock)."""
        if self.load_t0 is None:
            self.load_t0 = now

    def throttled(self, now: float) -> bool:
        window, origin = self.model.throttle, self.load_t0
        return window is not None and origin is not None and window[0] <= now - origin < window[0] + window[1]

    def slowdown(self, start: float) -> float:
        """How much longer a step that starts now takes."""
        return SLOWDOWN if self.throttled(start) else 1.0

    def on_step(self, start: float, length: float, prefill_tokens: int, decode_tokens: int,
                first_tokens: int = 0) -> None:
        """A step started: its tokens and length (the previous step has ended by now).
        ``first_tokens``: prefill chunks that finish their prompt (each ends with an output token)."""
        self._fold()
        m = self.model
        self.prefill_tokens += prefill_tokens
        self.decode_tokens += decode_tokens
        joules = m.j_per_prefill_token * prefill_tokens + m.j_per_decode_token * decode_tokens
        tokens = prefill_tokens + decode_tokens
        f = prefill_tokens / tokens if tokens else 0.0
        activity = {k: DECODE[k] * (1 - f) + PREFILL[k] * f for k in DECODE}
        self._step = (start, max(length, 1e-9), joules, activity, decode_tokens + first_tokens)

    def _fold(self) -> None:
        if self._step is None:
            return
        _, length, joules, activity, output = self._step
        self._output_tokens += output
        self._token_j += joules
        self._busy["busy"] += length
        for k, v in activity.items():
            self._busy[k] += v * length
        self._step = None

    # -- read by /dcgm/metrics -------------------------------------------------------------
    def _current(self, now: float) -> tuple[float, dict[str, float], int]:
        """Token energy, busy totals and output tokens up to ``now`` (the running step's energy and
        activity pro rata; its output tokens once it has ended, when the engine emits them)."""
        joules, busy, output = self._token_j, dict(self._busy), self._output_tokens
        if self._step is not None:
            start, length, step_j, activity, step_output = self._step
            done = min(max((now - start) / length, 0.0), 1.0)
            output += step_output if now >= start + length - 1e-9 else 0
            joules += step_j * done
            busy["busy"] += length * done
            for k, v in activity.items():
                busy[k] += v * length * done
        return joules, busy, output

    def energy_j(self, now: float) -> float:
        """Every GPU's energy since the mock started, exactly."""
        return self.model.idle_w * self.model.gpus * (now - self.t0) + self._current(now)[0]

    def output_tokens(self, now: float) -> int:
        """Output tokens the GPUs have produced by ``now``."""
        return self._current(now)[2]

    def throttled_s(self, now: float) -> float:
        window, origin = self.model.throttle, self.load_t0
        if window is None or origin is None:
            return 0.0
        return min(max(now - origin - window[0], 0.0), window[1])

    def scrape(self, now: float) -> dict[str, float]:
        """One GPU's readings now, averaged since the previous scrape (or the start)."""
        m = self.model
        energy = self.energy_j(now)
        _, busy, _ = self._current(now)
        then, then_energy, then_busy = self._last_scrape or (self.t0, 0.0, dict.fromkeys(busy, 0.0))
        self._last_scrape = (now, energy, busy)
        span = now - then
        share = {k: min(max((busy[k] - then_busy[k]) / span, 0.0), 1.0) if span > 0 else 0.0 for k in busy}
        throttled = self.throttled(now)
        reasons = POWER_CAP if throttled else (IDLE_REASON if share["busy"] == 0 else 0)
        power = (energy - then_energy) / span / m.gpus if span > 0 else m.idle_w
        return {
            "util": share["busy"], "dram": share["dram"], "tensor": share["tensor"], "sm": share["sm"],
            "power_w": power, "energy_mj": energy / m.gpus * 1000.0, "throttled": float(throttled),
            "reasons": float(reasons), "violation_ns": self.throttled_s(now) * 1e9,
        }


def _labels(index: int, hostname: str, model: str) -> str:
    uuid = f"GPU-00000000-6d6f-636b-0000-{index:012x}"  # "mock" in the middle
    return (f'gpu="{index}",UUID="{uuid}",pci_bus_id="00000000:{0x18 + index:02X}:00.0",device="nvidia{index}",'
            f'modelName="{model}",hostname="{hostname}"')


def render_dcgm(meter: GpuMeter, now: float, hostname: str = "llmload-mock") -> str:
    """The body of ``/dcgm/metrics``: dcgm-exporter's format (HELP, TYPE, one line per GPU)."""
    r = meter.scrape(now)
    m = meter.model
    clock = THROTTLED_SM_CLOCK if r["throttled"] else MAX_SM_CLOCK
    per_gpu = [
        ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", f"{clock:d}"),
        ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", f"{int(30 + r['power_w'] / 12):d}"),
        ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", f"{r['power_w']:f}"),
        ("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "counter", "Total energy consumption since boot (in mJ).",
         None),
        ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", f"{round(r['util'] * 100):d}"),
        ("DCGM_FI_DEV_XID_ERRORS", "gauge", "Value of the last XID error encountered.", "0"),
        ("DCGM_FI_DEV_FB_FREE", "gauge", "Framebuffer memory free (in MiB).", f"{FB_TOTAL_MIB - FB_USED_MIB:d}"),
        ("DCGM_FI_DEV_FB_USED", "gauge", "Framebuffer memory used (in MiB).", f"{FB_USED_MIB:d}"),
        ("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "gauge", "Current clock event reasons (bitmask).",
         f"{int(r['reasons']):d}"),
        ("DCGM_FI_DEV_POWER_VIOLATION", "counter", "Throttling duration due to power constraints (in ns).",
         f"{int(r['violation_ns']):d}"),
        ("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gauge", "Ratio of time the graphics engine is active.", f"{r['util']:f}"),
        ("DCGM_FI_PROF_SM_ACTIVE", "gauge", "The ratio of cycles an SM has at least 1 warp assigned.", f"{r['sm']:f}"),
        ("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "gauge", "Ratio of cycles the tensor (HMMA) pipe is active.",
         f"{r['tensor']:f}"),
        ("DCGM_FI_PROF_DRAM_ACTIVE", "gauge",
         "Ratio of cycles the device memory interface is active sending or receiving data.", f"{r['dram']:f}"),
    ]
    lines = []
    for name, kind, help_text, value in per_gpu:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
        for i in range(m.gpus):
            v = value if value is not None else f"{BOOT_ENERGY_MJ * (i + 1) + int(r['energy_mj']):d}"
            lines.append(f"{name}{{{_labels(i, hostname, m.model_name)}}} {v}")
    exact = meter.energy_j(now)
    lines += ["# HELP llmload_mock:gpu_energy_joules_total The mock's exact energy of every GPU since it started.",
              "# TYPE llmload_mock:gpu_energy_joules_total counter",
              f"llmload_mock:gpu_energy_joules_total {exact!r}",
              "# HELP llmload_mock:gpu_tokens_total Tokens the simulated GPUs computed, by phase.",
              "# TYPE llmload_mock:gpu_tokens_total counter",
              f'llmload_mock:gpu_tokens_total{{phase="prefill"}} {meter.prefill_tokens}',
              f'llmload_mock:gpu_tokens_total{{phase="decode"}} {meter.decode_tokens}',
              "# HELP llmload_mock:gpu_output_tokens_total Output tokens the simulated GPUs produced.",
              "# TYPE llmload_mock:gpu_output_tokens_total counter",
              f"llmload_mock:gpu_output_tokens_total {meter.output_tokens(now)}"]
    return "\n".join(lines) + "\n"
