"""The container image (issue 19, row 22): its base is pinned by digest, and neither a local
``.env`` nor a key file can reach it."""

from __future__ import annotations

import fnmatch
import os
import re

from tests.support.processes import ROOT


def _lines(name: str) -> list[str]:
    with open(os.path.join(ROOT, name), encoding="utf-8") as f:
        return [line.strip() for line in f if line.strip() and not line.lstrip().startswith("#")]


def test_every_base_image_is_pinned_by_digest():
    bases = [line.split()[1] for line in _lines("Dockerfile") if line.upper().startswith("FROM ")]
    assert bases, "no FROM line in the Dockerfile"
    for base in bases:
        assert re.fullmatch(r"[\w./-]+:[\w.-]+@sha256:[0-9a-f]{64}", base), f"FROM {base}: pin it as IMAGE:TAG@sha256:…"


def test_the_build_context_keeps_env_files_and_keys_out():
    patterns = _lines(".dockerignore")
    assert ".env*" in patterns
    for name in (".env", ".env.local", ".env.production", "prod.env", "certs/server.key", "tls/client.pem"):
        assert any(fnmatch.fnmatch(name, p.replace("**/", "*")) or fnmatch.fnmatch(name, p) for p in patterns), name
    # the image copies only what it installs: a COPY of the whole context would take what .dockerignore misses
    copies = [line for line in _lines("Dockerfile") if line.upper().startswith(("COPY ", "ADD "))]
    assert copies and not any(re.search(r"\s\.\s|\s\./?\s", f" {c} ") for c in copies), copies
