"""What counts as a secret and how it is cut out (issue 19, row 7)."""

from __future__ import annotations

import pytest

from llmload.wire.redact import is_secret_name, redact_pairs, redact_text, redact_url


@pytest.mark.parametrize("name", ["Authorization", "api-key", "x-api-key", "X-Goog-Api-Key", "access_token",
                                  "X-Auth-Token", "apiKey", "Cookie", "--api-key", "client_secret", "sig"])
def test_secret_names(name):
    assert is_secret_name(name)


@pytest.mark.parametrize("name", ["Content-Type", "api-version", "x-request-id", "model", "monkey", "X-Session"])
def test_ordinary_names(name):
    assert not is_secret_name(name)


def test_urls_lose_passwords_and_secret_query_values():
    assert redact_url("https://u:pw@h:8000/v1?api-key=sk-1&api-version=2024") == \
        "https://u:***@h:8000/v1?api-key=***&api-version=2024"
    assert redact_url("https://h/v1?x=1") == "https://h/v1?x=1"
    assert redact_url("http://user@h/") == "http://user@h/"
    assert redact_url(None) is None


def test_pairs_and_text():
    assert redact_pairs([("api-key", "sk"), ("X-Tenant", "t1")]) == [("api-key", "***"), ("X-Tenant", "t1")]
    assert redact_text("invalid key sk-live-123 for tenant", ["sk-live-123", "", "ab"]) == \
        "invalid key *** for tenant"
