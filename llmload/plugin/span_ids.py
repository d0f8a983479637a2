"""The ids of the next span, when they are known (``--trace-context``: the ``traceparent`` a request
carried): an OpenTelemetry ``IdGenerator`` that hands out preset ids once, random ones otherwise.
Kept apart from :mod:`llmload.plugin.span_export` because it subclasses the SDK's class, which
only the ``otel`` extra installs: this module is imported only once the SDK is known to be there.

Usage::

    ids = PresetIds(); provider = TracerProvider(id_generator=ids)
    ids.preset(trace_id_hex, span_id_hex); span = tracer.start_span(...); ids.preset("", "")
"""

from __future__ import annotations

from opentelemetry.sdk.trace.id_generator import RandomIdGenerator


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
