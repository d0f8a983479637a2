"""Recorded /metrics scrapes of each engine (tests/fixtures/metrics)."""

from __future__ import annotations

import re
from pathlib import Path

FIXTURES = Path(__file__).parent.parent / "fixtures" / "metrics"


ENGINE_NAMES = ("vllm", "sglang", "tgi", "llamacpp", "trtllm")


def scrapes(engine: str) -> list[tuple[float, str]]:
    text = (FIXTURES / f"{engine}.prom").read_text()
    parts = re.split(r"^# SNAPSHOT t=([0-9.]+)\n", text, flags=re.M)
    return [(float(parts[i]), parts[i + 1]) for i in range(1, len(parts), 2)]
