"""What real deployments need: TLS with a CA bundle or without verification, an HTTP(S) proxy from
the environment, the API key in another header, extra headers (a value env:VAR stays a secret),
query parameters. Local servers only: a self-signed certificate made here, a proxy written here."""

from __future__ import annotations

import os
import ssl
import subprocess
import sys

import gevent
import pytest
from gevent.server import StreamServer

from llmload.metrics.record import RequestMeta
from llmload.transport import FastTransport, OpenAITransport
from llmload.transport.connection import ClientOptions, parse_query
from llmload.wire.protocol import chat_body, encode_body, parse_header
from tests.support.processes import ROOT, free_port

CHAT = "/v1/chat/completions"
SSE = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
       + b"".join(b"%x\r\n%b\r\n" % (len(e), e) for e in (
           b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n',
           b'data: {"choices":[{"index":0,"delta":{"content":"!"},"finish_reason":"stop"}]}\n\n',
           b"data: [DONE]\n\n"))
       + b"0\r\n\r\n")


def read_head(sock) -> tuple[bytes, bytes]:
    buf = b""
    while b"\r\n\r\n" not in buf:
        data = sock.recv(65536)
        if not data:
            break
        buf += data
    head, _, rest = buf.partition(b"\r\n\r\n")
    return head, rest


class Server:
    """Answers every request with SSE, keeps the request heads; TLS when given a context."""

    def __init__(self, context: ssl.SSLContext | None = None) -> None:
        self.heads: list[str] = []
        tls = {"ssl_context": context} if context is not None else {}
        self.server = StreamServer(("127.0.0.1", 0), self.handle, **tls)
        self.server.start()
        self.port = self.server.server_port

    def handle(self, sock, _addr) -> None:
        while True:
            head, rest = read_head(sock)
            if not head:
                return
            self.heads.append(head.decode("latin-1"))
            length = next((int(line.split(":", 1)[1]) for line in head.decode().split("\r\n")
                           if line.lower().startswith("content-length:")), 0)
            while len(rest) < length:
                rest += sock.recv(65536)
            sock.sendall(SSE)

    def stop(self) -> None:
        self.server.stop()


class Proxy:
    """An HTTP proxy: CONNECT tunnels and absolute-form requests; it logs what it was asked."""

    def __init__(self) -> None:
        self.asked: list[str] = []
        self.server = StreamServer(("127.0.0.1", 0), self.handle)
        self.server.start()
        self.port = self.server.server_port

    def handle(self, client, _addr) -> None:
        head, rest = read_head(client)
        line = head.split(b"\r\n", 1)[0].decode()
        self.asked.append(line)
        method, target, _ = line.split(" ", 2)
        if method == "CONNECT":
            host, port = target.rsplit(":", 1)
            upstream = gevent.socket.create_connection((host, int(port)))
            client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            hostport = target.split("//", 1)[1].split("/", 1)[0]
            host, port = hostport.rsplit(":", 1)
            upstream = gevent.socket.create_connection((host, int(port)))
            upstream.sendall(head + b"\r\n\r\n" + rest)

        def pipe(a, b):
            try:
                while data := a.recv(65536):
                    b.sendall(data)
            except OSError:
                pass
            finally:
                for s in (a, b):
                    try:
                        s.shutdown(2)
                    except OSError:
                        pass

        gevent.joinall([gevent.spawn(pipe, client, upstream), gevent.spawn(pipe, upstream, client)], timeout=10)

    def stop(self) -> None:
        self.server.stop()


@pytest.fixture(scope="module")
def cert(tmp_path_factory):
    d = tmp_path_factory.mktemp("tls")
    key, crt = d / "key.pem", d / "cert.pem"
    subprocess.run(["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(crt),
                    "-days", "2", "-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"],
                   check=True, capture_output=True, timeout=60)
    return str(crt), str(key)


@pytest.fixture
def tls_server(cert):
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(*cert)
    s = Server(ctx)
    yield s
    s.stop()


@pytest.fixture
def server():
    s = Server()
    yield s
    s.stop()


def stream(t, rid="r"):
    try:
        return t.stream(encode_body(chat_body("m", [{"role": "user", "content": "hi"}], 4)),
                        RequestMeta(request_id=rid, start_time=0.0, scenario="c"))
    finally:
        t.close()


@pytest.mark.parametrize("cls", [FastTransport, OpenAITransport])
def test_https_with_a_ca_bundle_without_it_and_insecure(tls_server, cert, cls):
    url = f"https://127.0.0.1:{tls_server.port}"
    rec = stream(cls(url, CHAT, timeout=5, ca_bundle=cert[0]))
    assert rec.status == "ok" and rec.completion_tokens == 2
    rec = stream(cls(url, CHAT, timeout=5))
    assert rec.status == "connect_error" and "certificate" in rec.error.lower(), rec.error
    rec = stream(cls(url, CHAT, timeout=5, insecure=True))
    assert rec.status == "ok"


@pytest.mark.parametrize("cls", [FastTransport, OpenAITransport])
def test_api_key_in_another_header_and_extra_headers(server, cls, monkeypatch):
    monkeypatch.setenv("TEAM_SECRET", "s3cret-team-value")
    headers = (parse_header("X-Team: search"), parse_header("X-Token: env:TEAM_SECRET"))
    opts = ClientOptions(api_key="sk-test-key", api_key_header="api-key", headers=headers,
                         query=parse_query(["api-version=2024-10-21"]), timeout=5)
    rec = stream(cls(f"http://127.0.0.1:{server.port}/openai/deployments/d?x=1", "/chat/completions", opts))
    assert rec.status == "ok"
    head = server.heads[-1]
    first = head.split("\r\n", 1)[0]
    assert first.startswith("POST /openai/deployments/d/chat/completions?") and "x=1" in first
    assert "api-version=2024-10-21" in first
    lower = head.lower()
    assert "api-key: sk-test-key" in lower and "authorization:" not in lower
    assert "x-team: search" in lower and "x-token: s3cret-team-value" in lower


def test_a_header_from_an_unset_variable_is_a_clear_error():
    with pytest.raises(ValueError, match="--header X-Token: environment variable NOPE_NOT_SET is not set"):
        parse_header("X-Token: env:NOPE_NOT_SET")
    with pytest.raises(ValueError, match="expected 'Name: value'"):
        parse_header("no colon here")


@pytest.mark.parametrize("cls", [FastTransport, OpenAITransport])
def test_http_and_https_through_a_proxy_from_the_environment(server, tls_server, cert, cls, monkeypatch):
    proxy = Proxy()
    try:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        rec = stream(cls(f"http://127.0.0.1:{server.port}", CHAT, timeout=5))
        assert rec.status == "ok", rec.error
        rec = stream(cls(f"https://127.0.0.1:{tls_server.port}", CHAT, timeout=5, ca_bundle=cert[0]))
        assert rec.status == "ok", rec.error
        assert any(a.startswith(f"POST http://127.0.0.1:{server.port}/v1/chat/completions") for a in proxy.asked)
        assert any(a.startswith(f"CONNECT 127.0.0.1:{tls_server.port}") for a in proxy.asked)
        monkeypatch.setenv("NO_PROXY", "127.0.0.1")
        asked = len(proxy.asked)
        assert stream(cls(f"http://127.0.0.1:{server.port}", CHAT, timeout=5)).status == "ok"
        assert len(proxy.asked) == asked  # bypassed
    finally:
        proxy.stop()


def test_headers_reach_the_server_from_the_command_line_and_the_key_stays_out_of_the_files(tmp_path):
    """A real Locust run with --header (one read from the environment) and --api-key-header."""
    from tests.support import wire_server

    log = str(tmp_path / "wire.jsonl")
    proc, url = wire_server.start_process(log)
    try:
        env = {**os.environ, "PYTHONPATH": ROOT, "LLMLOAD_API_KEY": "sk-very-secret-key", "GW_TOKEN": "gw-secret-1"}
        prefix = tmp_path / "run"
        res = subprocess.run(
            [sys.executable, "-m", "locust", "-f", os.path.join(ROOT, "locustfiles", "steps.py"), "--host", url,
             "--headless", "-u", "1", "-r", "1", "-t", "2s", "--csv", str(prefix), "--model", "m",
             "--steps", "1", "--step-seconds", "2", "--header", "X-Script: usage_first", "--header",
             "X-Gateway-Token: env:GW_TOKEN", "--api-key-header", "api-key", "--master-bind-port", str(free_port())],
            cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert res.returncode == 0, res.stderr[-2000:]
    finally:
        proc.terminate()
        proc.wait(10)
    import json

    with open(log) as f:
        logged = [json.loads(line) for line in f]
    entries = [e for e in logged if e["request_id"]]  # the streamed requests (they carry X-Request-Id)
    probes = [e for e in logged if not e["request_id"] and e["script"]]  # GET /v1/models before the run
    assert entries and probes  # (the rest: the server-metrics reader, which gets no key)
    for e in entries + probes:  # the same key header, the same extra headers, no Authorization
        assert e["headers"].get("api-key") == "sk-very-secret-key" and "authorization" not in e["headers"]
        assert e["headers"].get("x-gateway-token") == "gw-secret-1"
    written = "".join(p.read_text(errors="replace") for p in tmp_path.iterdir() if p.name.startswith("run"))
    for secret in ("sk-very-secret-key", "gw-secret-1"):
        assert secret not in written and secret not in res.stdout + res.stderr


def test_the_models_probe_goes_through_tls_and_the_proxy_as_the_run_does(server, tls_server, cert, monkeypatch):
    """``GET /v1/models`` (preflight, model, manifest) takes --ca-bundle, --insecure and the proxy."""
    from llmload.transport.models import get_models

    https = f"https://127.0.0.1:{tls_server.port}"
    assert get_models(https, ClientOptions(ca_bundle=cert[0])).status == 200
    untrusted = get_models(https, ClientOptions())
    assert untrusted.status is None and "certificate" in untrusted.error.lower(), untrusted.error
    assert get_models(https, ClientOptions(insecure=True)).status == 200
    proxy = Proxy()
    try:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
        monkeypatch.delenv("NO_PROXY", raising=False)
        monkeypatch.delenv("no_proxy", raising=False)
        assert get_models(f"http://127.0.0.1:{server.port}", ClientOptions()).status == 200
        assert get_models(https, ClientOptions(ca_bundle=cert[0])).status == 200
        assert f"GET http://127.0.0.1:{server.port}/v1/models HTTP/1.1" in proxy.asked
        assert any(a.startswith(f"CONNECT 127.0.0.1:{tls_server.port} ") for a in proxy.asked)
    finally:
        proxy.stop()
