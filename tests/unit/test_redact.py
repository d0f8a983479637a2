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


def test_the_command_line_in_run_json_keeps_no_secret():
    from llmload.plugin.output.run_manifest import redact_argv

    argv = ["locust", "-f", "chat.py", "--web-login", "--headless", "--header", "Authorization: Bearer sk-a",
            "--header=X-Api-Key: sk-b", "--header", "X-Tenant: t1", "--query", "key=sk-c", "--query",
            "api-version=2024", "--host", "https://u:pw@h/v1?api-key=sk-d", "--auth-token", "sk-e"]
    out = redact_argv(argv)
    text = " ".join(out)
    for secret in ("sk-a", "sk-b", "sk-c", "sk-d", "sk-e", "pw@"):
        assert secret not in text, text
    assert out[3:5] == ["--web-login", "--headless"]  # a boolean flag hides nothing after it
    assert "X-Tenant: t1" in out and "api-version=2024" in out
