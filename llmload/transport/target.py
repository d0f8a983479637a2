"""Where requests go (scheme, host, port, path) and the one probe of the server before a run:
the model list at ``/v1/models``.

Usage::

    t = Target("http://127.0.0.1:8000/v1", "/v1/chat/completions")   # t.path == "/v1/chat/completions"
    first_model("http://127.0.0.1:8000", api_key=None)              # "my-model", or None
"""

from __future__ import annotations

import json
import logging
import urllib.request
from urllib.parse import urlsplit

log = logging.getLogger("llmload")


class Target:
    """Where requests go: scheme, host, port and the path of the endpoint."""

    __slots__ = ("scheme", "host", "port", "path", "host_header")

    def __init__(self, base_url: str, path: str) -> None:
        parts = urlsplit(base_url if "://" in base_url else "http://" + base_url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"--host {base_url!r}: expected http(s)://HOST[:PORT][/base/path]")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        base = parts.path.rstrip("/")
        if base.endswith("/v1") and path.startswith("/v1/"):
            base = base[:-3]  # accept both http://h:8000 and http://h:8000/v1
        self.path = base + path
        default_port = 443 if self.scheme == "https" else 80
        self.host_header = self.host if self.port == default_port else f"{self.host}:{self.port}"


def models_url(base_url: str) -> str:
    url = base_url.rstrip("/")
    return (url[:-3] if url.endswith("/v1") else url) + "/v1/models"


def first_model(base_url: str, api_key: str | None, timeout: float = 10.0) -> str | None:
    """The first model the server lists at /v1/models; None (with one warning) when it lists none."""
    url = models_url(base_url)
    req = urllib.request.Request(url, headers={"Authorization": f"Bearer {api_key}"} if api_key else {})
    try:
        with urllib.request.urlopen(req, timeout=timeout) as resp:
            data = json.loads(resp.read(1 << 20))
        return str(data["data"][0]["id"])
    except Exception as e:  # no /v1/models: the server may not need a model name
        log.warning("llmload: could not read %s (%s); sending model 'default' (set --model)", url, e)
        return None
