"""Secrets never corrupt a request head nor show in a repr; server text never runs as a
spreadsheet formula (issue 19, rows 16-18)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from llmload.plugin.options.option_checks import ConfigError
from llmload.plugin.options.option_checks import client_options as _client_options
from llmload.transport.connection import ClientOptions
from llmload.wire.protocol import parse_header


def test_an_env_header_value_with_a_line_break_is_refused(monkeypatch):
    monkeypatch.setenv("TOKEN_FROM_FILE", "sk-secret\n")
    with pytest.raises(ValueError, match="TOKEN_FROM_FILE holds a line break"):
        parse_header("X-Token: env:TOKEN_FROM_FILE")
    monkeypatch.setenv("TOKEN_FROM_FILE", "sk-secret")
    assert parse_header("X-Token: env:TOKEN_FROM_FILE") == ("X-Token", "sk-secret")


def test_an_api_key_with_a_line_break_is_refused_at_start(monkeypatch):
    monkeypatch.setenv("LLMLOAD_API_KEY", "sk-secret\r\n")
    env = SimpleNamespace(parsed_options=SimpleNamespace())
    with pytest.raises(ConfigError, match="holds a line break"):
        _client_options(env, 60.0)
    monkeypatch.setenv("LLMLOAD_API_KEY", "sk-secret")
    assert _client_options(env, 60.0).api_key == "sk-secret"


def test_the_repr_shows_no_key_and_no_header_value():
    opts = ClientOptions(api_key="sk-live-123", headers=(("X-Api-Token", "tok-456"),), query=(("key", "q-789"),))
    text = repr(opts)
    for secret in ("sk-live-123", "tok-456", "q-789"):
        assert secret not in text
    assert "X-Api-Token" in text and "api_key=set" in text


def test_server_text_that_looks_like_a_formula_is_quoted_in_the_row():
    from llmload.metrics.record import CSV_COLUMNS, RequestMeta, RequestRecord

    rec = RequestRecord(meta=RequestMeta(request_id="r", start_time=0.0, scenario="s"), status="stream_error")
    rec.error, rec.finish_reason = '=HYPERLINK("http://x","y")', "@cmd"
    row = dict(zip(CSV_COLUMNS, rec.row(), strict=True))
    assert row["error"] == '\'=HYPERLINK("http://x","y")' and row["finish_reason"] == "'@cmd"
    rec.error, rec.finish_reason = "HTTP 500: boom", "length"
    row = dict(zip(CSV_COLUMNS, rec.row(), strict=True))
    assert row["error"] == "HTTP 500: boom" and row["finish_reason"] == "length"


def test_scenario_env_and_secret_named_headers_are_redacted_from_echoed_text(monkeypatch):
    import dataclasses

    from llmload.workload.file.scenario import parse_scenario

    monkeypatch.setenv("TENANT_TOKEN", "tenant-secret-1")
    spec = parse_scenario("workloads:\n  a:\n    headers: {X-Tenant: env:TENANT_TOKEN, X-Api-Key: literal-key-2,"
                          " X-Trace: plain}\n", "s.yaml", ".").workloads[0]
    assert set(spec.header_secrets) == {"tenant-secret-1", "literal-key-2"}
    client = ClientOptions(api_key="sk-3333")
    client = dataclasses.replace(client, headers=client.headers + spec.headers,
                                 secrets=client.secrets + spec.header_secrets)
    echoed = "401: bad key sk-3333 / tenant tenant-secret-1 / key literal-key-2 / trace plain"
    assert client.redact(echoed) == "401: bad key *** / tenant *** / key *** / trace plain"
