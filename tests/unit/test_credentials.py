"""The API key goes only to the host the run was configured for (issue 19, row 1)."""

from __future__ import annotations

from llmload.transport.connection import ClientOptions
from llmload.transport.credentials import CredentialBinding, origin

CLIENT = ClientOptions(api_key="sk-1", headers=(("X-Api-Token", "tok"), ("X-Tenant", "t1"), ("X-Sig", "envval")),
                       secrets=("envval",))


def test_origins():
    assert origin("https://H.example/v1") == ("https", "h.example", 443)
    assert origin("http://h:8000") == ("http", "h", 8000)
    assert origin("ftp://h") is None and origin("h:8000") is None


def test_the_bound_host_gets_the_key_and_another_does_not():
    b = CredentialBinding()
    b.bind("https://api.example/v1")
    same, warning = b.client_for("https://api.example:443/other", CLIENT)
    assert same is CLIENT and warning is None
    other, warning = b.client_for("http://evil:9", CLIENT)
    assert other.api_key is None and other.headers == (("X-Tenant", "t1"),)
    assert "https://api.example:443 to http://evil:9" in warning and "--allow-key-to-any-host" in warning


def test_the_first_host_binds_and_the_flag_lifts_it():
    b = CredentialBinding()
    b.bind("http://a:1")
    b.bind("http://b:2")
    assert b.client_for("http://b:2", CLIENT)[0].api_key is None
    free = CredentialBinding(allow_any_host=True)
    free.bind("http://a:1")
    assert free.client_for("http://b:2", CLIENT) == (CLIENT, None)


def test_no_secrets_no_warning():
    b = CredentialBinding()
    b.bind("http://a:1")
    plain = ClientOptions(headers=(("X-Tenant", "t1"),))
    assert b.client_for("http://b:2", plain) == (plain, None)
