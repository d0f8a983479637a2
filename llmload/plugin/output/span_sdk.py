"""The parts of the span export that subclass the OpenTelemetry SDK, which only the ``otel`` extra
installs: this module is imported only once the SDK is known to be there
(:mod:`llmload.plugin.output.span_export` checks it at init).

* :class:`PresetIds`: the ids of the next span when they are known (``--trace-context``: the
  ``traceparent`` a request carried), random ones otherwise.
* :class:`GuardedExporter`: the OTLP exporter, except that a collector that fails is left alone for
  ``QUIET_S``: the spans meanwhile are dropped at once and counted, so a dead collector costs one
  export's timeout, not one per batch (it held the end of a 3-s run for 25 s), and is said once.

Usage::

    ids = PresetIds(); provider = TracerProvider(id_generator=ids)
    ids.preset(trace_id_hex, span_id_hex); span = tracer.start_span(...); ids.preset("", "")
    exporter = GuardedExporter(OTLPSpanExporter(endpoint=url, timeout=5), url)
    exporter.sent, exporter.dropped
"""

from __future__ import annotations

import logging
import time
from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace.export import SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.id_generator import RandomIdGenerator

log = logging.getLogger("llmload")

QUIET_S = 30.0


class PresetIds(RandomIdGenerator):
    """``start_span`` asks for a span id and (without a parent) a trace id: these are the preset
    ones while set (the same greenlet sets, starts and clears them: nothing can interleave)."""

    def __init__(self) -> None:
        super().__init__()
        self._trace = 0
        self._span = 0

    def preset(self, trace_id: str, span_id: str) -> None:
        """Hex ids (32 and 16 digits), or '' for random ones."""
        self._trace = int(trace_id, 16) if trace_id else 0
        self._span = int(span_id, 16) if span_id else 0

    def generate_trace_id(self) -> int:
        return self._trace or super().generate_trace_id()

    def generate_span_id(self) -> int:
        return self._span or super().generate_span_id()


class GuardedExporter(SpanExporter):
    """See the module docstring; ``where`` names the collector in the one warning."""

    def __init__(self, inner: Any, where: str, quiet_s: float = QUIET_S) -> None:
        self.inner, self.where, self.quiet_s = inner, where, quiet_s
        self.sent = self.dropped = 0
        self._quiet_until = 0.0
        self._said = False

    def export(self, spans: Sequence[Any]) -> SpanExportResult:
        if time.monotonic() < self._quiet_until:
            self.dropped += len(spans)
            return SpanExportResult.FAILURE
        result = self.inner.export(spans)
        if result == SpanExportResult.SUCCESS:
            self.sent += len(spans)
            return result
        self.dropped += len(spans)
        self._quiet_until = time.monotonic() + self.quiet_s
        if not self._said:
            self._said = True
            log.warning("llmload: --otlp-endpoint %s: an export failed; spans are dropped for %g s at a time "
                        "until it answers (the rows are all in PREFIX_requests.csv)", self.where, self.quiet_s)
        return result

    def shutdown(self) -> None:
        self.inner.shutdown()

    def force_flush(self, timeout_millis: int = 30000) -> bool:
        return bool(self.inner.force_flush(timeout_millis))
