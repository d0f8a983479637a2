"""The API key is bound to its host (issue 19, row 1).

Locust's ``/swarm`` lets whoever reaches the web UI change the host, with no CSRF token and no
login unless ``--web-login``. The key and every secret header (``env:`` values, and headers whose
names say key, token, secret or auth) go only to the origin (scheme, host, port) known when the
run was configured: ``--host`` at launch, or the first host of a web-UI session. Another host
gets the requests without them, and one warning says so, unless ``--allow-key-to-any-host``.

Pure: no Locust, no I/O.

Usage::

    binding = CredentialBinding(allow_any_host=False)
    binding.bind("https://api.example:443/v1")            # at launch, or the first start
    client, warning = binding.client_for(host, client)    # at each test start
"""

from __future__ import annotations

import dataclasses
from urllib.parse import urlsplit

from llmload.transport.connection import ClientOptions
from llmload.wire.redact import is_secret_name

_DEFAULT_PORTS = {"http": 80, "https": 443}


def origin(url: str) -> tuple[str, str, int] | None:
    """(scheme, host, port) of an http(s) URL; None for anything else."""
    try:
        parts = urlsplit(url.strip())
        scheme = parts.scheme.lower()
        if scheme not in _DEFAULT_PORTS or not parts.hostname:
            return None
        return scheme, parts.hostname.lower(), parts.port or _DEFAULT_PORTS[scheme]
    except ValueError:
        return None


def origin_text(o: tuple[str, str, int] | None) -> str:
    return "(none)" if o is None else f"{o[0]}://{o[1]}:{o[2]}"


def without_credentials(client: ClientOptions) -> ClientOptions:
    """The same connection settings with no key and no secret header."""
    secret_values = set(client.secrets)
    headers = tuple((n, v) for n, v in client.headers if not (is_secret_name(n) or v in secret_values))
    return dataclasses.replace(client, api_key=None, headers=headers)


@dataclasses.dataclass
class CredentialBinding:
    """Which origin the run's credentials belong to."""

    allow_any_host: bool = False
    bound: tuple[str, str, int] | None = None

    def bind(self, host: str | None) -> None:
        """Bind to ``host`` unless already bound (the first host wins)."""
        if self.bound is None and host:
            self.bound = origin(host)

    def client_for(self, host: str, client: ClientOptions) -> tuple[ClientOptions, str | None]:
        """The client options to use against ``host``, and a warning when credentials were held back."""
        if self.allow_any_host or self.bound is None:
            return client, None
        target = origin(host)
        if target == self.bound:
            return client, None
        has_secrets = bool(client.api_key) or len(without_credentials(client).headers) < len(client.headers)
        if not has_secrets:
            return client, None
        return without_credentials(client), (
            f"the host changed from {origin_text(self.bound)} to {origin_text(target)} after the run was "
            "configured: requests go there without the API key and secret headers (give "
            "--allow-key-to-any-host at launch to send them to any host)")
