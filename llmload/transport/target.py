"""Where requests go: scheme, host, port, path and query (``GET /v1/models`` is in :mod:`.models`).

Usage::

    t = Target("http://127.0.0.1:8000/v1", "/v1/chat/completions")   # t.path == "/v1/chat/completions"
    Target("https://x.openai.azure.com/openai/deployments/d?api-version=2024-10-21", "/chat/completions")
"""

from __future__ import annotations

from urllib.parse import urlencode, urlsplit


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
