"""Where requests go (scheme, host, port, path and query) and the one probe of the server before a
run: the model list at ``/v1/models``.

Usage::

    t = Target("http://127.0.0.1:8000/v1", "/v1/chat/completions")   # t.path == "/v1/chat/completions"
    Target("https://x.openai.azure.com/openai/deployments/d?api-version=2024-10-21", "/chat/completions")
    first_model("http://127.0.0.1:8000", ClientOptions())            # "my-model", or None
"""

from __future__ import annotations

import json
import logging
import urllib.request
from urllib.parse import urlencode, urlsplit

from llmload.transport.connection import ClientOptions

log = logging.getLogger("llmload")


class Target:
    """Where requests go: scheme, host, port and the path of the endpoint."""

    __slots__ = ("scheme", "host", "port", "path", "host_header", "query")

    def __init__(self, base_url: str, path: str, query: tuple[tuple[str, str], ...] = ()) -> None:
        if "://" not in base_url:
            raise ValueError(f"--host {base_url!r}: expected a URL with its scheme, e.g. http://{base_url}")
        parts = urlsplit(base_url)
        try:
            port = parts.port
        except ValueError:
            raise ValueError(f"--host {base_url!r}: the port is not a number 1-65535") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"--host {base_url!r}: expected http(s)://HOST[:PORT][/base/path]")
        self.scheme = parts.scheme
        self.host = parts.hostname
        self.port = port or (443 if parts.scheme == "https" else 80)
        base = parts.path.rstrip("/")
        if base.endswith("/v1") and path.startswith("/v1/"):
            base = base[:-3]  # accept both http://h:8000 and http://h:8000/v1
        self.query = parts.query
        if query:
            self.query = "&".join(q for q in (self.query, urlencode(query)) if q)
        self.path = base + path + (f"?{self.query}" if self.query else "")
        default_port = 443 if self.scheme == "https" else 80
        self.host_header = self.host if self.port == default_port else f"{self.host}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.host_header}{self.path}"


def models_url(base_url: str, options: ClientOptions | None = None) -> str:
    target = Target(base_url, "/v1/models", options.query if options else ())
    return target.url


def models_request(base_url: str, options: ClientOptions | None = None) -> tuple[urllib.request.OpenerDirector,
                                                                                  urllib.request.Request]:
    """``GET /v1/models`` as the run's own requests go: the same key, headers, query and TLS (and
    the environment's proxy, as urllib takes it)."""
    options = options or ClientOptions()
    url = models_url(base_url, options)
    handlers = [urllib.request.HTTPSHandler(context=options.ssl_context())] if url.startswith("https:") else []
    return urllib.request.build_opener(*handlers), urllib.request.Request(url, headers=dict(options.request_headers()))


def first_model(base_url: str, options: ClientOptions | None = None, timeout: float = 10.0) -> str | None:
    """The first model the server lists at /v1/models; None (with one warning) when it lists none."""
    options = options or ClientOptions()
    opener, req = models_request(base_url, options)
    try:
        with opener.open(req, timeout=timeout) as resp:
            data = json.loads(resp.read(1 << 20))
        return str(data["data"][0]["id"])
    except Exception as e:  # no /v1/models: the server may not need a model name
        log.warning("llmload: could not read %s (%s); sending model 'default' (set --model)", req.full_url,
                    options.redact(str(e)))
        return None
