"""An inference engine's ``/metrics`` body (Prometheus text format) → samples. Pure, no I/O.

The text is read by ``prometheus_client``'s own parser (the library vLLM, SGLang and
TensorRT-LLM expose their metrics with); this module only adds what a load test needs on top:

* **All or nothing.** A malformed body raises one :class:`ExpositionError` naming the source,
  the line number, the parser's complaint and the line itself; nothing of that scrape is kept.
  Prometheus does the same (a scrape with a parse error is a failed scrape), and a half-read
  body could drop a histogram's ``+Inf`` bucket and skew a percentile silently. The scraper
  should log the error and try again at the next tick: rates simply span the gap.
* **Lenient where servers differ, not where data is wrong.** A ``# TYPE`` the parser does not
  know (``# TYPE x weird``) is read as untyped instead of failing the scrape; ``NaN``,
  ``+Inf``/``-Inf`` values, escaped label values (``\\"``, ``\\\\``, ``\\n``), a family that
  appears twice, ``# EOF``/``# UNIT`` lines, exemplars and timestamps all parse. Sample
  timestamps are ignored: the scraper passes the scrape time in. A series that appears twice
  keeps the last value and is counted in ``duplicates``.
* **Samples, flat.** The result maps ``(sample name, sorted labels)`` to a float. Types come from
  the ``# TYPE`` lines as a side table (:meth:`Exposition.kind`), because the parser splits an
  OpenMetrics-style family (``# TYPE x counter`` followed by ``x_total``) into untyped
  singletons: consumers (``known.py``) therefore match by sample name, never by family.
* **Counters** come out under their ``_total`` name even when the server wrote none (TGI's
  ``tgi_request_count 42`` is read as ``tgi_request_count_total``): that is how the parser
  normalises them, and ``known.py`` accepts both spellings.
* **Size cap.** A body over ``max_bytes`` (default :data:`MAX_EXPOSITION_BYTES`, 2 MiB) is
  refused before parsing. The parser is pure Python, about 5–6 MB/s on this project's 2-core
  box (2 MiB ≈ 0.35–0.4 s), and it runs on the load generator, whose event loop it blocks
  meanwhile. Real bodies are far smaller: parsing and mapping the fixtures' vLLM scrape (two
  engines, 69 kB) takes ≈ 14 ms, TGI's (86 kB, 1024 ``tgi_batch_next_size`` buckets) ≈ 33 ms.
  The scraper should read at most ``max_bytes + 1`` bytes and stop, so a runaway endpoint
  cannot fill memory either.

Needs ``prometheus_client`` ≥ 0.22: 0.20 and 0.21 misread a sample followed by an exemplar
(labels and value garbled, no error). Ask servers for the classic text format (``Accept:
text/plain; version=0.0.4``): recent ``prometheus_client`` versions answer an OpenMetrics
request with ``vllm:`` escaped to ``vllm_``.

Usage::

    exposition = parse_exposition(body, source="http://gpu-box:8000/metrics")
    exposition.samples[("vllm:num_requests_running", (("engine", "0"), ("model_name", "m")))]
    exposition.kind("vllm:prompt_tokens_total")    # "counter"
"""

from __future__ import annotations

import io
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client.parser import text_fd_to_metric_families

MAX_EXPOSITION_BYTES = 2 * 1024 * 1024
PAUSE_EVERY_LINES = 32  # ~0.5 ms of parsing

Labels = tuple[tuple[str, str], ...]
SeriesKey = tuple[str, Labels]

# What prometheus_client.metrics_core.Metric accepts (plus the classic "untyped"); any other
# "# TYPE" would make the parser raise for the whole body.
_PARSER_TYPES = frozenset({"counter", "gauge", "summary", "histogram", "gaugehistogram", "unknown",
                           "info", "stateset", "untyped"})
_SUFFIXES = ("_total", "_bucket", "_count", "_sum", "_created", "_info", "_gcount", "_gsum")


class ExpositionError(ValueError):
    """A body that is not a Prometheus text exposition (or is over the size cap)."""


@dataclass(frozen=True, slots=True)
class Exposition:
    """One parsed scrape: every sample's value, keyed by name and sorted labels."""

    samples: dict[SeriesKey, float]
    """``(name, ((label, value), ...))`` → value, labels sorted by name."""
    types: dict[str, str] = field(default_factory=dict)
    """Family name (as the parser reports it: counters without ``_total``) → declared type."""
    duplicates: int = 0
    """Series that appeared more than once (the last value was kept)."""

    def kind(self, sample_name: str) -> str:
        """The declared type of the family a sample belongs to, or ``"unknown"``."""
        declared = self.types.get(sample_name)
        if declared is not None:
            return declared
        for suffix in _SUFFIXES:
            if sample_name.endswith(suffix):
                declared = self.types.get(sample_name[: -len(suffix)])
                if declared is not None:
                    return declared
        return "unknown"

    def names(self) -> set[str]:
        """Every sample name present."""
        return {name for name, _ in self.samples}


class _Lines:
    """Feeds the parser line by line, remembering where it is for error messages.

    Also rewrites a ``# TYPE`` the parser would reject into ``untyped`` (see module docstring).
    """

    def __init__(self, text: str, pause: Callable[[], None] | None = None) -> None:
        self._text = text
        self._pause = pause
        self.number = 0
        self.current = ""

    def __iter__(self) -> Iterator[str]:
        pause = self._pause
        for line in io.StringIO(self._text):
            self.number += 1
            if pause is not None and not self.number % PAUSE_EVERY_LINES:
                pause()
            self.current = line.rstrip("\r\n")
            stripped = line.strip()
            if stripped.startswith("# TYPE"):
                parts = stripped.split(None, 3)
                if len(parts) == 4 and parts[3].strip() not in _PARSER_TYPES:
                    yield f"# TYPE {parts[2]} untyped\n"
                    continue
            yield line


def _hint(text: str) -> str:
    head = text.lstrip()[:1]
    if head == '"':
        return (" (the body is a JSON-encoded string, not text: llama.cpp builds around b7010–b7100 "
                "did this, ggml-org/llama.cpp#17384)")
    if head in ("{", "["):
        return (" (the body looks like JSON: trtllm-serve's /metrics is JSON iteration stats; "
                "its Prometheus endpoint is /prometheus/metrics)")
    if head == "<":
        return " (the body looks like HTML: is this the metrics path?)"
    return ""


def parse_exposition(body: str | bytes, *, source: str = "exposition",
                     max_bytes: int = MAX_EXPOSITION_BYTES, pause: Callable[[], None] | None = None) -> Exposition:
    """Parse a whole body, or raise :class:`ExpositionError` naming ``source`` and the line.

    ``max_bytes`` caps the body (for a ``str``, its length in characters). ``pause`` is called
    every ``PAUSE_EVERY_LINES`` lines: a caller in an event loop yields there when it has held
    the loop too long (vLLM's ~1,300 lines take ~23 ms to parse).
    """
    if len(body) > max_bytes:
        raise ExpositionError(f"{source}: the body is {len(body)} bytes, over the {max_bytes}-byte cap "
                              "for a metrics exposition; refusing to parse it")
    if isinstance(body, bytes | bytearray):
        try:
            text = bytes(body).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise ExpositionError(f"{source}: not UTF-8 text (byte {exc.start}); "
                                  "a Prometheus exposition is UTF-8") from None
    else:
        text = body
    lines = _Lines(text, pause)
    samples: dict[SeriesKey, float] = {}
    types: dict[str, str] = {}
    duplicates = 0
    try:
        for family in text_fd_to_metric_families(lines):  # type: ignore[arg-type]  # any line iterable works
            if family.type != "unknown":
                types.setdefault(family.name, family.type)
            for i, sample in enumerate(family.samples, 1):
                if pause is not None and not i % PAUSE_EVERY_LINES:
                    pause()  # TGI's batch-size histogram alone has 1,025 buckets
                key = (sample.name, tuple(sorted(sample.labels.items())))
                if key in samples:
                    duplicates += 1
                samples[key] = float(sample.value)
    except (ValueError, IndexError, KeyError, TypeError) as exc:
        # The parser reads one line at a time, so the line it stopped on is the one at fault.
        reason = str(exc) or type(exc).__name__
        raise ExpositionError(f"{source}: line {lines.number}: not a Prometheus text exposition line "
                              f"({reason}): {lines.current[:160]!r}{_hint(text)}") from None
    return Exposition(samples=samples, types=types, duplicates=duplicates)
