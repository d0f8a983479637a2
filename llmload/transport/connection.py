"""How to reach a real deployment: the API key and its header, extra headers, query parameters,
TLS (a CA bundle, or no verification), an HTTP(S) proxy from the environment, the deadlines and
the size limit of one event. Shared by both transports and the ``/v1/models`` probe.

Secrets: the API key comes from the environment only; a header written ``Name: env:VAR`` takes its
value from ``VAR`` in each process's own environment. Neither value is ever put in an option that
Locust ships to workers or shows in its page, nor in any log line or file llmload writes.

Usage::

    opts = ClientOptions(api_key="sk-...", api_key_header="api-key", headers=parse_headers(["X-Team: a"]))
    opts.request_headers()        # [("api-key", "sk-..."), ("X-Team", "a")]
    ctx = opts.ssl_context()      # for https targets
    proxy = proxy_for(target)     # a Proxy or None (HTTP_PROXY / HTTPS_PROXY / NO_PROXY)
"""

from __future__ import annotations

import base64
import ssl
import urllib.request
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from urllib.parse import unquote, urlsplit

from llmload.wire.protocol import ANTHROPIC_VERSION, MESSAGES_KEY_HEADER, parse_header
from llmload.wire.redact import is_secret_name, redact_text
from llmload.wire.sse import DEFAULT_MAX_BYTES


def parse_headers(texts: Iterable[str], where: str = "--header") -> tuple[tuple[str, str], ...]:
    return tuple(parse_header(t, where) for t in texts)


def parse_query(texts: Iterable[str], where: str = "--query") -> tuple[tuple[str, str], ...]:
    out = []
    for text in texts:
        key, sep, value = str(text).partition("=")
        if not sep or not key.strip():
            raise ValueError(f"{where} {text!r}: expected NAME=VALUE, e.g. api-version=2024-10-21")
        out.append((key.strip(), value.strip()))
    return tuple(out)


@dataclass(frozen=True)
class ClientOptions:
    """Everything about a connection that is not the URL. Timeouts in seconds."""

    api_key: str | None = None
    api_key_header: str = "Authorization"  # "Authorization" sends "Bearer KEY"; any other name sends KEY
    headers: tuple[tuple[str, str], ...] = ()
    query: tuple[tuple[str, str], ...] = ()
    ca_bundle: str | None = None
    insecure: bool = False
    timeout: float = 600.0  # no output event for this long after the last one
    first_token_timeout: float | None = None  # no output event within this long of t0 (None: timeout)
    connect_timeout: float = 10.0
    request_deadline: float | None = None  # the whole request, t0 to its end (None: no limit)
    max_event_bytes: int = DEFAULT_MAX_BYTES
    secrets: tuple[str, ...] = field(default=(), repr=False)  # values never to be written anywhere

    def __repr__(self) -> str:
        # never the key nor a header's value: a repr ends up in logs and tracebacks
        key = "set" if self.api_key else "none"
        names = ", ".join(n for n, _ in self.headers)
        query = ", ".join(k for k, _ in self.query)
        return (f"ClientOptions(api_key={key}, api_key_header={self.api_key_header!r}, headers=[{names}], "
                f"query=[{query}], ca_bundle={self.ca_bundle!r}, insecure={self.insecure}, timeout={self.timeout}, "
                f"first_token_timeout={self.first_token_timeout}, connect_timeout={self.connect_timeout}, "
                f"request_deadline={self.request_deadline}, "
                f"max_event_bytes={self.max_event_bytes})")

    @property
    def first_token_deadline(self) -> float:
        return self.timeout if self.first_token_timeout is None else self.first_token_timeout

    def auth_header(self) -> tuple[str, str] | None:
        if not self.api_key:
            return None
        if self.api_key_header.lower() == "authorization":
            return "Authorization", f"Bearer {self.api_key}"
        return self.api_key_header, self.api_key

    def request_headers(self) -> list[tuple[str, str]]:
        auth = self.auth_header()
        return ([auth] if auth else []) + list(self.headers)

    def ssl_context(self) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=self.ca_bundle)
        if self.insecure:
            ctx.check_hostname = False
            ctx.verify_mode = ssl.CERT_NONE
        return ctx

    def redact(self, text: str) -> str:
        """``text`` with every secret value replaced, for messages that quote a server."""
        return redact_text(text, (self.api_key or "", *self.secrets,
                                  *(v for n, v in self.headers if is_secret_name(n))))


def for_messages_api(options: ClientOptions, key_header_given: bool) -> ClientOptions:
    """The connection settings for the Anthropic Messages API: the key goes in ``x-api-key`` (unless
    ``--api-key-header`` named a header), and ``anthropic-version`` is sent unless a header gives one.

    Usage::

        opts = for_messages_api(ClientOptions(api_key="sk-ant-..."), key_header_given=False)
        opts.request_headers()   # [("x-api-key", "sk-ant-..."), ("anthropic-version", "2023-06-01")]
    """
    headers = options.headers
    if not any(n.lower() == "anthropic-version" for n, _ in headers):
        headers = headers + (("anthropic-version", ANTHROPIC_VERSION),)
    key_header = options.api_key_header if key_header_given else MESSAGES_KEY_HEADER
    return replace(options, headers=headers, api_key_header=key_header)


@dataclass(frozen=True)
class Proxy:
    host: str
    port: int
    authorization: str | None  # "Basic ..." from user:password in the proxy URL

    def headers(self) -> str:
        return f"Proxy-Authorization: {self.authorization}\r\n" if self.authorization else ""


def proxy_for(scheme: str, host: str) -> Proxy | None:
    """The proxy the environment names for a target (``HTTPS_PROXY``/``HTTP_PROXY``, ``NO_PROXY``)."""
    proxies = urllib.request.getproxies()
    url = proxies.get(scheme) or proxies.get("all")
    if not url or urllib.request.proxy_bypass(host):
        return None
    parts = urlsplit(url if "://" in url else "http://" + url)
    if parts.scheme not in ("http", "") or not parts.hostname:
        raise ValueError(f"proxy {parts.scheme}://{parts.hostname}: only http:// proxies are supported")
    auth = None
    if parts.username is not None:
        cred = f"{unquote(parts.username)}:{unquote(parts.password or '')}".encode()
        auth = "Basic " + base64.b64encode(cred).decode()
    return Proxy(parts.hostname, parts.port or 80, auth)
