"""The connection, fault and server-metrics options, each checked into the settings object a run
uses (:mod:`llmload.plugin.run.config` puts them together). A bad value raises :class:`ConfigError`
naming the flag and what it expects.

Usage::

    client_options(environment, timeout)   # ClientOptions: key, headers, query, TLS, deadlines
    fault_settings(environment)            # FaultSettings
    server_metrics_setup(environment)      # ServerMetricsSetup
"""

from __future__ import annotations

import math
import os
import urllib.parse
from dataclasses import dataclass
from typing import Any

from llmload.plugin.options.flags import api_key_from_env, option
from llmload.plugin.options.shipped_options import own_or_master
from llmload.transport import ClientOptions
from llmload.transport.connection import parse_headers, parse_query
from llmload.wire.protocol import ENV_PREFIX

BACKOFF_MODES = ("on", "off")  # --backoff


@dataclass(frozen=True)
class BackoffPolicy:
    """``--backoff on|off``, ``--backoff-base-s``, ``--backoff-max-s``."""

    base_s: float = 0.5
    max_s: float = 60.0
    enabled: bool = True

    def __post_init__(self) -> None:
        for name in ("base_s", "max_s"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, int | float) or not math.isfinite(v) or v <= 0:
                raise ValueError(f"--backoff-{name.replace('_', '-')} {v!r}: expected seconds > 0")
        if self.base_s > self.max_s:
            raise ValueError(f"--backoff-base-s {self.base_s:g} is above --backoff-max-s {self.max_s:g}")


class ConfigError(ValueError):
    """A run that cannot start; the message says what is wrong, where, and what to do."""


@dataclass(frozen=True)
class ServerMetricsSetup:
    """Where and how often to read the server's Prometheus metrics (``--server-metrics*``)."""

    urls: tuple[str, ...] = ()  # empty: probe the target host, unless off
    interval_s: float = 2.0
    off: bool = False
    gpu_urls: tuple[str, ...] = ()  # --gpu-metrics: DCGM exporters; empty: no GPU telemetry
PREFLIGHT_MODES = ("end", "wait", "off")


@dataclass(frozen=True)
class FaultSettings:
    """What a run does when the server or the master misbehaves (--backoff*, --preflight*,
    --master-lost-after)."""

    backoff: BackoffPolicy = BackoffPolicy()
    preflight: str = "end"
    preflight_wait_s: float = 300.0
    master_lost_after_s: float = 20.0


def seconds_option(environment: Any, key: str, default: float | None) -> float | None:
    text = option(environment, key)
    if text is None:
        return default
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = -1.0
    if not (value > 0 and value < float("inf")):
        raise ConfigError(f"--{key.replace('_', '-')} {text!r}: expected seconds > 0")
    return value


def fault_settings(environment: Any) -> FaultSettings:
    mode = option(environment, "backoff") or "on"
    if mode not in BACKOFF_MODES:
        raise ConfigError(f"--backoff {mode!r}: expected one of {', '.join(BACKOFF_MODES)}")
    try:
        policy = BackoffPolicy(seconds_option(environment, "backoff_base_s", 0.5),
                               seconds_option(environment, "backoff_max_s", 60.0), mode == "on")
    except ValueError as e:
        raise ConfigError(str(e)) from None
    preflight = option(environment, "preflight") or "end"
    if preflight not in PREFLIGHT_MODES:
        raise ConfigError(f"--preflight {preflight!r}: expected one of {', '.join(PREFLIGHT_MODES)}")
    return FaultSettings(policy, preflight, seconds_option(environment, "preflight_wait_s", 300.0),
                         seconds_option(environment, "master_lost_after", 20.0))


def client_options(environment: Any, timeout: float) -> ClientOptions:
    """The connection settings; ``env:VAR`` header values are read here, in each process."""
    opts = getattr(environment, "parsed_options", None)
    shipped = vars(opts) if opts is not None else {}
    try:
        # a worker: the master's headers and query, each secret value from its own command line
        header_texts = own_or_master(shipped, "header")
        headers = parse_headers(header_texts)
        query = parse_query(own_or_master(shipped, "query"))
    except ValueError as e:
        raise ConfigError(str(e)) from None
    max_bytes_text = option(environment, "max_event_bytes")
    max_bytes = 1 << 20
    if max_bytes_text is not None:
        try:
            max_bytes = int(max_bytes_text)
        except ValueError:
            max_bytes = 0
        if max_bytes < 1024:
            raise ConfigError(f"--max-event-bytes {max_bytes_text!r}: expected a whole number of bytes >= 1024")
    ca = option(environment, "ca_bundle")
    if ca is not None and not os.path.isfile(ca):
        raise ConfigError(f"--ca-bundle {ca}: no such file")
    secret_texts = [t for t in header_texts if t.partition(":")[2].strip().startswith(ENV_PREFIX)]
    api_key = api_key_from_env()
    if api_key and ("\r" in api_key or "\n" in api_key):
        raise ConfigError("LLMLOAD_API_KEY / OPENAI_API_KEY holds a line break (a newline at the end of a secret "
                          "file?); remove it")
    return ClientOptions(
        api_key=api_key, api_key_header=option(environment, "api_key_header") or "Authorization",
        headers=headers, query=query, ca_bundle=ca, insecure=bool(option(environment, "insecure")),
        timeout=timeout, first_token_timeout=seconds_option(environment, "first_token_timeout", None),
        max_event_bytes=max_bytes, request_deadline=seconds_option(environment, "request_deadline", None),
        secrets=tuple(v for n, v in headers if any(t.partition(":")[0].strip() == n for t in secret_texts)))


def server_metrics_setup(environment: Any) -> ServerMetricsSetup:
    urls = [str(u).strip() for u in option(environment, "server_metrics", []) or []]
    for url in urls:
        if not is_http_url(url):
            raise ConfigError(f"--server-metrics {url!r}: expected the http:// or https:// URL of a Prometheus "
                              "metrics endpoint, e.g. http://127.0.0.1:8000/metrics")
    off = bool(option(environment, "no_server_metrics"))
    if off and urls:
        raise ConfigError("--no-server-metrics and --server-metrics URL: pass one or the other")
    text = option(environment, "server_metrics_interval", "2")
    try:
        interval = float(text)
    except (TypeError, ValueError):
        interval = -1.0
    if not 0 < interval < float("inf"):
        raise ConfigError(f"--server-metrics-interval {text!r}: expected seconds > 0, e.g. 2")
    gpu_urls = [str(u).strip() for u in option(environment, "gpu_metrics", []) or []]
    for url in gpu_urls:
        if url != "nvml" and not is_http_url(url):
            raise ConfigError(f"--gpu-metrics {url!r}: expected the http:// or https:// URL of a DCGM exporter's "
                              "metrics, e.g. http://127.0.0.1:9400/metrics, or nvml (this machine's GPUs)")
    return ServerMetricsSetup(urls=tuple(urls), interval_s=interval, off=off, gpu_urls=tuple(gpu_urls))


def is_http_url(url: str) -> bool:
    try:
        parts = urllib.parse.urlsplit(url)
        parts.port  # noqa: B018  (raises ValueError for a port that is not a number 0-65535)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and not any(c.isspace() for c in url)
