"""What counts as a secret, and the text without it. Pure.

A header or query parameter is secret when its name says so: ``Authorization``, ``api-key``,
``x-api-key``, or any name with a word key, token, secret, auth, password, cookie or credential
in it (split at ``-``, ``_`` and case changes: ``X-Goog-Api-Key``, ``access_token``). A URL's
userinfo (``https://user:pw@host``) is secret, and so is the value of a secret query parameter in
it. Values known to be secret (an API key, an ``env:`` header's value) are cut out of any text,
such as an error body a server echoed back.

Usage::

    is_secret_name("X-Api-Key")                     # True
    redact_url("https://u:pw@h/v1?api-key=sk&x=1")  # "https://u:***@h/v1?api-key=***&x=1"
    redact_text("bad key sk-123", ["sk-123"])       # "bad key ***"
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

MASK = "***"
SECRET_WORDS = frozenset({"key", "apikey", "token", "secret", "password", "passwd", "pass", "auth", "authorization",
                          "login", "credential", "credentials", "cookie", "bearer", "signature", "sig"})
_WORD_SPLIT = re.compile(r"[-_.\s]+|(?<=[a-z])(?=[A-Z])")
_USERINFO = re.compile(r"(\w[\w+.-]*://)([^/@\s:]*)(?::[^/@\s]*)?@")
MIN_SECRET_LEN = 4  # shorter values would cut ordinary words out of a message


def is_secret_name(name: str) -> bool:
    """True for a header, query parameter or flag whose name says it holds a secret."""
    words = {w.lower() for w in _WORD_SPLIT.split(name.strip().lstrip("-")) if w}
    return bool(words & SECRET_WORDS) or name.strip().lower() in {"apikey", "api-key", "x-api-key"}


def redact_pairs(pairs: Iterable[tuple[str, str]]) -> list[tuple[str, str]]:
    """Headers or query parameters, secret values masked."""
    return [(n, MASK if is_secret_name(n) else v) for n, v in pairs]


def redact_url(url: str | None) -> str | None:
    """The URL without its userinfo's password and without the values of secret query parameters."""
    if not url:
        return url
    out = _USERINFO.sub(lambda m: f"{m.group(1)}{m.group(2)}:{MASK}@" if m.group(0).count(":") > 1
                        else m.group(0), url)
    try:
        parts = urlsplit(out)
    except ValueError:
        return out
    if not parts.query:
        return out
    query = parse_qsl(parts.query, keep_blank_values=True)
    if not any(is_secret_name(k) for k, _ in query):
        return out
    masked = urlencode(redact_pairs(query), safe="*")
    return urlunsplit((parts.scheme, parts.netloc, parts.path, masked, parts.fragment))


def redact_text(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every known secret value cut out (longest first, so a key's prefix that is also
    a secret leaves no tail)."""
    for s in sorted({s for s in secrets if s and len(s) >= MIN_SECRET_LEN}, key=len, reverse=True):
        text = text.replace(s, MASK)
    return text
