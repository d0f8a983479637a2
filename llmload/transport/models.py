"""The one ``GET /v1/models`` of a run: the preflight probe, the model a run sends when ``--model`` is
not given, and the server's answer in ``PREFIX_run.json``.

It goes as the run's own requests go: the same key header (``--api-key-header``), extra headers
(``--header``), query (``--query``), TLS (``--ca-bundle``, ``--insecure``) and the environment's proxy
(:func:`~llmload.transport.connection.proxy_for`, as the transports take it). It reads at most
:data:`MAX_BODY_BYTES` of the answer within ``timeout`` seconds in all, and follows a redirect only on
the same origin (scheme, host and port): the key and headers are never sent to another one.

The preflight: any HTTP answer counts (a 401 or a 404 is a server that is there); a refused
connection, an unknown host or silence does not. ``--preflight end`` (default) ends the run with
that message, ``wait`` probes once a second until the server answers (bounded by
``--preflight-wait-s``), ``off`` skips the check. Then a model the run names (``--model``, a
workload's ``model:`` or ``models:``) that the server's list leaves out ends the run too, with one
message naming it and the list (a server that lists no model is taken at its word).

Usage::

    answer = get_models("http://127.0.0.1:8000", ClientOptions(api_key="sk-..."))
    answer.status, answer.json()                                       # 200, {"data": [{"id": "m"}, ...]}
    first_model("http://127.0.0.1:8000", ClientOptions())              # "m", or None (one warning)
    problem = preflight("http://127.0.0.1:8000", ClientOptions(), mode="end", wait_s=300)
    problem = problem or unserved_model("http://127.0.0.1:8000", ClientOptions(), {"nope": "--model"})
    if problem:
        sys.exit("llmload: " + problem)
"""

from __future__ import annotations

import http.client
import json
import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any
from urllib.parse import urljoin, urlsplit

from llmload.transport.connection import ClientOptions, proxy_for
from llmload.transport.credentials import origin
from llmload.transport.target import Target
from llmload.wire.redact import redact_url

log = logging.getLogger("llmload")

PROBE_TIMEOUT_S = 5.0
MODELS_TIMEOUT_S = 10.0
MAX_BODY_BYTES = 1 << 20  # a model list is a few KiB; a proxy's error page must not fill the memory
MAX_REDIRECTS = 3
RETRY_S = 1.0
_REDIRECTS = (301, 302, 303, 307, 308)


@dataclass(frozen=True)
class ModelsAnswer:
    """What ``GET /v1/models`` got: ``status`` None when no HTTP answer came (``error`` says why);
    ``error`` also set when an answer came but is not usable (too large, a redirect not followed)."""

    url: str  # the last URL asked (secrets redacted)
    status: int | None = None
    body: bytes = b""
    error: str | None = None

    @property
    def answered(self) -> bool:
        return self.status is not None

    def json(self) -> Any:
        """The parsed body; raises ValueError naming the URL when there is none to parse."""
        if self.error:
            raise ValueError(f"{self.url}: {self.error}")
        if self.status != 200:
            raise ValueError(f"{self.url}: HTTP {self.status}: {self.body[:200].decode('utf-8', 'replace')}")
        try:
            return json.loads(self.body)
        except ValueError as e:
            raise ValueError(f"{self.url}: not JSON ({e})") from None


def models_url(base_url: str, options: ClientOptions | None = None) -> str:
    return Target(base_url, "/v1/models", options.query if options else ()).url


def get_models(base_url: str, options: ClientOptions | None = None, timeout: float = MODELS_TIMEOUT_S,
               max_bytes: int = MAX_BODY_BYTES) -> ModelsAnswer:
    """``GET /v1/models`` as the run's requests go; never raises for network or server faults."""
    options = options or ClientOptions()
    deadline = time.monotonic() + timeout
    try:
        url = models_url(base_url, options)
    except ValueError as e:
        return ModelsAnswer(options.redact(base_url), error=str(e))
    for _ in range(MAX_REDIRECTS + 1):
        shown = _shown(url, options)
        try:
            status, location, body, too_big = _get(url, options, deadline, max_bytes)
            body = _redacted(body, options)
        except TimeoutError:
            return ModelsAnswer(shown, error=f"no answer within {timeout:g} s")
        except OSError as e:  # refused, unknown host, a certificate not trusted: the strerror says which
            return ModelsAnswer(shown, error=options.redact(e.strerror or str(e)))
        except (http.client.HTTPException, ValueError) as e:
            return ModelsAnswer(shown, error=options.redact(str(e) or type(e).__name__))
        if too_big:
            return ModelsAnswer(shown, status, body, f"the answer is larger than {max_bytes} bytes; not read")
        if status not in _REDIRECTS or not location:
            return ModelsAnswer(shown, status, body)
        new_url = urljoin(url, location)
        if origin(new_url) != origin(url):  # another scheme, host or port (or not http at all)
            return ModelsAnswer(shown, status, body, (
                f"HTTP {status} redirect to {_shown(new_url, options)}, another origin: not followed, so that the "
                "key and headers are not sent there (set --host to the URL that answers)"))
        url = new_url
    return ModelsAnswer(_shown(url, options), status, body, f"more than {MAX_REDIRECTS} redirects")


def _shown(url: str, options: ClientOptions) -> str:
    """A URL for a message or a file: no password, no secret query value, no key."""
    return options.redact(redact_url(url) or url)


def _redacted(body: bytes, options: ClientOptions) -> bytes:
    """The body without the key or a secret header value (a server that echoes the request's headers)."""
    if any(s and s.encode() in body for s in (options.api_key, *options.secrets)):
        return options.redact(body.decode("utf-8", "replace")).encode()
    return body


def _get(url: str, options: ClientOptions, deadline: float, max_bytes: int) -> tuple[int, str, bytes, bool]:
    """One GET (no redirect followed): status, Location, at most ``max_bytes`` of the body, and
    whether there was more. Raises OSError, TimeoutError or http.client.HTTPException."""
    parts = urlsplit(url)
    scheme, host = parts.scheme, parts.hostname or ""
    port = parts.port or (443 if scheme == "https" else 80)
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    remaining = max(0.01, deadline - time.monotonic())
    proxy = proxy_for(scheme, host)  # ValueError for a proxy the transports cannot use either
    conn: http.client.HTTPConnection
    extra: list[tuple[str, str]] = []
    if scheme == "https":
        address = (proxy.host, proxy.port) if proxy else (host, port)
        conn = http.client.HTTPSConnection(*address, timeout=remaining, context=options.ssl_context())
        if proxy:
            auth = {"Proxy-Authorization": proxy.authorization} if proxy.authorization else None
            conn.set_tunnel(host, port, headers=auth)
    elif proxy:
        conn = http.client.HTTPConnection(proxy.host, proxy.port, timeout=remaining)
        path = url  # absolute form through an HTTP proxy
        if proxy.authorization:
            extra.append(("Proxy-Authorization", proxy.authorization))
    else:
        conn = http.client.HTTPConnection(host, port, timeout=remaining)
    try:
        conn.putrequest("GET", path, skip_accept_encoding=True)
        for name, value in [("Accept", "application/json"), *options.request_headers(), *extra]:
            conn.putheader(name, value)
        conn.endheaders()
        resp = conn.getresponse()
        body = bytearray()
        while len(body) <= max_bytes:
            left = deadline - time.monotonic()
            if left <= 0:
                raise TimeoutError
            if conn.sock is not None:
                conn.sock.settimeout(left)
            piece = resp.read1(min(1 << 16, max_bytes + 1 - len(body)))  # what came: the deadline holds
            if not piece:
                break
            body += piece
        too_big = len(body) > max_bytes
        return resp.status, resp.getheader("Location") or "", bytes(body[:max_bytes]), too_big
    finally:
        conn.close()


def first_model(base_url: str, options: ClientOptions | None = None, timeout: float = MODELS_TIMEOUT_S) -> str | None:
    """The first model the server lists at /v1/models; None (with one warning) when it lists none."""
    options = options or ClientOptions()
    answer = get_models(base_url, options, timeout)
    model = None
    try:
        model = first_model_id(answer.json())
        problem = "it lists no model"
    except ValueError as e:  # no /v1/models: the server may not need a model name
        problem = str(e).removeprefix(f"{answer.url}: ")
    if model is None:
        log.warning("llmload: could not read %s (%s); sending model 'default' (set --model)", answer.url, problem)
    return model


def first_model_id(models: Any) -> str | None:
    """``data[0].id`` of a ``/v1/models`` answer, else None."""
    data = models.get("data") if isinstance(models, dict) else None
    if isinstance(data, list) and data and isinstance(data[0], dict) and data[0].get("id") is not None:
        return str(data[0]["id"])
    return None


def listed_ids(models: Any) -> list[str] | None:
    """Every ``data[].id`` of a ``/v1/models`` answer; None when it is no such list or lists none."""
    data = models.get("data") if isinstance(models, dict) else None
    if not isinstance(data, list):
        return None
    ids = [str(d["id"]) for d in data if isinstance(d, dict) and d.get("id") is not None]
    return ids or None


def unserved_model(base_url: str, options: ClientOptions, wanted: dict[str, str],
                   timeout: float = MODELS_TIMEOUT_S) -> str | None:
    """None when the server lists every model in ``wanted`` (name → the flag or key that set it), or
    lists none (it may not need a name); else the one message that ends the run: a name it does not
    list gets every request refused (vLLM: 404 "The model `x` does not exist.")."""
    if not wanted:
        return None
    answer = get_models(base_url, options, timeout)
    try:
        ids = listed_ids(answer.json()) if answer.status == 200 else None
    except ValueError:
        ids = None
    if ids is None:
        return None
    missing = [name for name in wanted if name not in ids]
    if not missing:
        return None
    name = missing[0]
    shown = ", ".join(ids[:8]) + (f" and {len(ids) - 8} more" if len(ids) > 8 else "")
    return (f"{wanted[name]}: the server at {_shown(base_url, options)} does not serve model {name!r} "
            f"(GET {answer.url} lists {shown}); every request would be refused: name one it lists "
            "(--preflight off skips this check)")


def models_or_error(base_url: str | None, options: ClientOptions | None = None,
                    timeout: float = MODELS_TIMEOUT_S) -> Any:
    """The answer as ``PREFIX_run.json`` keeps it: the parsed JSON, or ``{"error": ...}``."""
    if not base_url:
        return {"error": "no host"}
    try:
        return get_models(base_url, options, timeout).json()
    except ValueError as e:
        return {"error": str(e)[:300]}


def probe(base_url: str, options: ClientOptions, timeout: float = PROBE_TIMEOUT_S) -> str | None:
    """None when the server answered (with any status); else why it did not."""
    answer = get_models(base_url, options, timeout, max_bytes=1 << 16)
    return None if answer.answered else answer.error


def preflight(base_url: str, options: ClientOptions, mode: str, wait_s: float,
              sleep: Callable[[float], None] = time.sleep) -> str | None:
    """None when the run may start; else the one message that ends it."""
    if mode == "off":
        return None
    reason = probe(base_url, options)
    if reason is None:
        return None
    url, host = _shown(models_url(base_url, options), options), _shown(base_url, options)
    if mode == "wait":
        log.warning("llmload: %s does not answer (%s); waiting up to %g s for it (--preflight-wait-s)", url,
                    reason, wait_s)
        deadline = time.monotonic() + wait_s
        while time.monotonic() < deadline:
            sleep(min(RETRY_S, max(0.0, deadline - time.monotonic())))
            reason = probe(base_url, options)
            if reason is None:
                log.info("llmload: %s answers; starting", url)
                return None
        return (f"the server at {host} still does not answer after {wait_s:g} s (GET {url}: {reason}); "
                "is it up, and is --host right?")
    return (f"cannot reach the server at {host} (GET {url}: {reason}); is it up, and is --host right? "
            "(--preflight wait waits for it, --preflight off skips this check)")
