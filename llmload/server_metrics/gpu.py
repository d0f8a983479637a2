"""GPU telemetry from NVIDIA's dcgm-exporter: which fields llmload reads, under which names, and
how one scrape's samples become rows and per-GPU readings. Pure, no I/O.

The field names, types and units are dcgm-exporter's (``etc/default-counters.csv`` and the DCGM
field ids it watches), read from its code, not remembered: see ``tests/fixtures/metrics/SOURCES.md``.
Each GPU line carries ``gpu`` (the index), ``UUID`` (``uuid`` with ``--use-old-namespace``),
``pci_bus_id``, ``device``, ``modelName`` and the node's ``hostname`` (``Hostname`` before
dcgm-exporter #655); on Kubernetes also ``pod``, ``namespace``, ``container`` and ``pod_uid``
(``pod_name``, ``pod_namespace``, ``container_name`` with the old namespace); a MIG instance adds
``GPU_I_PROFILE`` and ``GPU_I_ID``. A GPU is known by its UUID (and MIG instance): a GPU that two
pods share appears once per pod with the same values, and is counted once.

DCGM writes a *blank* (a field the GPU does not support, or no value yet) as a huge sentinel
(int64 ≥ 0x7ffffff0_00000000, e.g. 9223372036854775794 in dcgm-exporter's README; double ≥ 2⁴⁷);
those are dropped, not averaged.

Usage::

    exposition = parse_exposition(body, source=url)
    rows = gpu_samples(exposition)              # MappedSample per series, for PREFIX_gpu_metrics.csv
    readings = gpu_readings(rows)               # {gpu key: {"power_w": 512.3, "energy_mj": ..., ...}}
    gpu_identity(rows[0].labels)                # GpuIdentity(key="GPU-604a…", gpu="0", hostname=..., pod=...)
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from llmload.server_metrics.known import MappedSample
from llmload.server_metrics.parse import Exposition, Labels

GAUGE, COUNTER = "gauge", "counter"


@dataclass(frozen=True, slots=True)
class GpuField:
    """One DCGM field llmload reads: its exporter name, llmload's key and how to read it."""

    name: str
    key: str
    kind: str
    unit: str
    scale: float = 1.0
    """Multiplies the exporter's value into llmload's unit (GPU_UTIL's percent → a fraction)."""
    description: str = ""


# The fields of issue 22, in report order. The profiling (DCP) ratios need a datacenter GPU (Volta
# or newer); DCGM_FI_PROF_SM_ACTIVE is commented out in the default counters file, so
# DCGM_FI_PROF_GR_ENGINE_ACTIVE stands in for it when it is absent (see gpu_window).
FIELDS: tuple[GpuField, ...] = (
    GpuField("DCGM_FI_DEV_GPU_UTIL", "util", GAUGE, "fraction", 0.01, "GPU utilization (DCGM: in %)"),
    GpuField("DCGM_FI_PROF_SM_ACTIVE", "sm_active", GAUGE, "ratio", 1.0,
             "ratio of cycles an SM has at least 1 warp assigned"),
    GpuField("DCGM_FI_PROF_GR_ENGINE_ACTIVE", "gr_engine_active", GAUGE, "ratio", 1.0,
             "ratio of time the graphics engine is active"),
    GpuField("DCGM_FI_PROF_DRAM_ACTIVE", "dram_active", GAUGE, "ratio", 1.0,
             "ratio of cycles the device memory interface is active sending or receiving data"),
    GpuField("DCGM_FI_PROF_PIPE_TENSOR_ACTIVE", "tensor_active", GAUGE, "ratio", 1.0,
             "ratio of cycles the tensor (HMMA) pipe is active"),
    GpuField("DCGM_FI_DEV_FB_USED", "fb_used_mib", GAUGE, "MiB", 1.0, "framebuffer memory used"),
    GpuField("DCGM_FI_DEV_FB_FREE", "fb_free_mib", GAUGE, "MiB", 1.0, "framebuffer memory free"),
    GpuField("DCGM_FI_DEV_POWER_USAGE", "power_w", GAUGE, "W", 1.0, "power draw"),
    GpuField("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "energy_mj", COUNTER, "mJ", 1.0,
             "total energy consumption since boot"),
    GpuField("DCGM_FI_DEV_SM_CLOCK", "sm_clock_mhz", GAUGE, "MHz", 1.0, "SM clock frequency"),
    GpuField("DCGM_FI_DEV_GPU_TEMP", "temp_c", GAUGE, "°C", 1.0, "GPU temperature"),
    GpuField("DCGM_FI_DEV_XID_ERRORS", "xid", GAUGE, "code", 1.0, "value of the last XID error encountered"),
    GpuField("DCGM_FI_DEV_CLOCKS_EVENT_REASONS", "clock_event_reasons", GAUGE, "bitmask", 1.0,
             "why the clocks are below their maximum (DCGM ≥ 3.3)"),
    GpuField("DCGM_FI_DEV_CLOCK_THROTTLE_REASONS", "clock_event_reasons", GAUGE, "bitmask", 1.0,
             "the same bitmask, under its name before DCGM 3.3"),
    GpuField("DCGM_FI_DEV_POWER_VIOLATION", "power_violation_ns", COUNTER, "ns", 1.0,
             "throttling duration due to power constraints"),
    GpuField("DCGM_FI_DEV_THERMAL_VIOLATION", "thermal_violation_ns", COUNTER, "ns", 1.0,
             "throttling duration due to thermal constraints"),
    GpuField("DCGM_EXP_CLOCK_EVENTS_COUNT", "clock_events", GAUGE, "count", 1.0,
             "dcgm-exporter's count of clock events in its window, by clock_event"),
    GpuField("DCGM_EXP_XID_ERRORS_COUNT", "xid_count", GAUGE, "count", 1.0,
             "dcgm-exporter's count of XID errors in its window, by xid"),
)
BY_NAME = {f.name: f for f in FIELDS}
KEYS = tuple(dict.fromkeys(f.key for f in FIELDS))

# DCGM_CLOCKS_EVENT_REASON_* bits that mean the GPU ran slower than asked (dcgm_fields.h, as
# dcgm-exporter's clock_events_collector.go names them). Idle (0x1), the application-clock setting
# (0x2), sync boost (0x10) and display clocks (0x100) are not throttling.
THROTTLE_BITS = {0x4: "power_cap", 0x8: "hw_slowdown", 0x20: "sw_thermal", 0x40: "hw_thermal",
                 0x80: "hw_power_brake"}
THROTTLE_EVENTS = frozenset(THROTTLE_BITS.values())  # DCGM_EXP_CLOCK_EVENTS_COUNT's clock_event values

INT64_BLANK = 0x7FFFFFF000000000  # DCGM_INT64_BLANK and the "not found/supported" codes above it
FP64_BLANK = 2.0 ** 47  # DCGM_FP64_BLANK (140737488355328.0) and above

# Labels that say which GPU a line is about; the rest (pod, namespace, driver, ...) describe it.
_UUID_LABELS = ("UUID", "uuid")
_HOST_LABELS = ("hostname", "Hostname")
_POD_LABELS = (("pod", "pod_name"), ("namespace", "pod_namespace"), ("container", "container_name"))
_PER_EVENT = {"clock_events": "clock_event", "xid_count": "xid"}


_DOUBLES = frozenset({"util", "sm_active", "gr_engine_active", "dram_active", "tensor_active", "power_w"})


def is_blank(value: float, field: GpuField | None = None) -> bool:
    """A DCGM blank (no value, or not supported by this GPU): an int64 blank, or a double blank on
    a field DCGM keeps as a double (a byte counter may well pass 2⁴⁷)."""
    if math.isnan(value) or value >= INT64_BLANK:
        return True
    return field is not None and field.key in _DOUBLES and value >= FP64_BLANK


def field_of(sample_name: str) -> GpuField | None:
    """The field a sample belongs to; counters may come with the parser's ``_total`` added."""
    field = BY_NAME.get(sample_name)
    if field is None and sample_name.endswith("_total"):
        field = BY_NAME.get(sample_name[:-6])
    return field


def gpu_samples(exposition: Exposition) -> list[MappedSample]:
    """The rows of one scrape for ``PREFIX_gpu_metrics.csv``: every series of the body under the
    exporter's own name (a counter without the ``_total`` the parser adds), blanks dropped. (An
    exporter's body is its ``DCGM_*`` fields; the mock adds its exact totals, ``llmload_mock:*``.)"""
    rows = []
    for (name, labels), value in exposition.samples.items():
        field = field_of(name)
        if is_blank(value, field):
            continue
        if field is not None:
            name = field.name
        elif name.startswith("DCGM_") and name.endswith("_total") and exposition.types.get(name[:-6]) == COUNTER:
            name = name[:-6]  # dcgm-exporter writes counters without _total; the parser added it
        rows.append(MappedSample(name, labels, value))
    return rows


@dataclass(frozen=True, slots=True)
class GpuIdentity:
    """Which GPU a line is about, and where it runs."""

    key: str
    """Unique per GPU (and MIG instance): its UUID, else ``hostname/gpu``."""
    gpu: str
    uuid: str
    model: str
    hostname: str
    pod: str
    namespace: str
    container: str
    mig: str

    def to_json(self) -> dict[str, str]:
        return {k: getattr(self, k) for k in ("gpu", "uuid", "model", "hostname", "pod", "namespace", "container",
                                              "mig") if getattr(self, k)}


def _first(labels: Mapping[str, str], names: Iterable[str]) -> str:
    return next((labels[n] for n in names if labels.get(n)), "")


def gpu_identity(labels: Labels | Mapping[str, str], endpoint: str = "") -> GpuIdentity:
    """The GPU of one line (``endpoint`` tells GPUs without a UUID or hostname apart)."""
    lab = labels if isinstance(labels, Mapping) else dict(labels)
    uuid = _first(lab, _UUID_LABELS)
    host = _first(lab, _HOST_LABELS)
    gpu = lab.get("gpu", "")
    mig = lab.get("GPU_I_ID", "")
    base = uuid or f"{host or endpoint}/{gpu}"
    pod, namespace, container = (_first(lab, names) for names in _POD_LABELS)
    return GpuIdentity(key=base + (f"/mig{mig}" if mig else ""), gpu=gpu, uuid=uuid, model=lab.get("modelName", ""),
                       hostname=host, pod=pod, namespace=namespace, container=container,
                       mig=lab.get("GPU_I_PROFILE", "") + (f" #{mig}" if mig else ""))


def gpu_readings(rows: Iterable[MappedSample] | Iterable[tuple[str, Labels, float]], endpoint: str = "",
                 ) -> tuple[dict[str, dict[str, float]], dict[str, GpuIdentity]]:
    """One scrape's values per GPU under llmload's keys (scaled to their unit), and who each GPU is.

    A GPU that appears under several pods gives one value (their mean: the same reading). The
    exporter's own event counts (``clock_events``, ``xid_count``) are summed over the throttling
    clock events and over every XID, so that > 0 means "it happened in the exporter's window".
    """
    values: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    events: dict[str, dict[str, dict[str, float]]] = defaultdict(lambda: defaultdict(dict))
    who: dict[str, GpuIdentity] = {}
    for row in rows:
        name, labels, value = (row.metric, row.labels, row.value) if isinstance(row, MappedSample) else row
        field = field_of(name)
        if field is None or is_blank(value, field):
            continue
        ident = gpu_identity(labels, endpoint)
        who.setdefault(ident.key, ident)
        per = _PER_EVENT.get(field.key)
        if per is not None:
            event = dict(labels).get(per, "")
            if field.key == "clock_events" and event not in THROTTLE_EVENTS:
                continue
            events[ident.key][field.key][event] = value  # one value per event, whichever pod showed it
            continue
        values[ident.key][field.key].append(value * field.scale)
    out: dict[str, dict[str, float]] = {}
    for key in who:
        reading = {k: sum(v) / len(v) for k, v in values[key].items() if v}
        for k, by_event in events[key].items():
            reading[k] = sum(by_event.values())
        out[key] = reading
    return out, who


def throttle_reasons(bitmask: float) -> list[str]:
    """The throttling reasons set in a clock-event bitmask (``[]`` when it ran as fast as asked)."""
    if is_blank(bitmask) or bitmask < 0:
        return []
    bits = int(bitmask)
    return [name for bit, name in THROTTLE_BITS.items() if bits & bit]
