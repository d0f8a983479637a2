"""The one ``GET /v1/models`` (preflight, model discovery, ``PREFIX_run.json``) goes as the run's
requests go: an Azure-style target that wants its key in ``api-key`` and an ``api-version`` query
answers it; a redirect to another origin is not followed with the key; the body and the time are
capped. Local servers only (gevent, in this process; a real Locust run for the manifest)."""

from __future__ import annotations

import json
import os
import time

import pytest
from gevent.server import StreamServer

from llmload.transport.connection import ClientOptions, parse_query
from llmload.transport.models import first_model, get_models, models_or_error, preflight
from tests.support.locust_runs import CHAT, SYNTHETIC, run_locust
from tests.support.processes import free_port

KEY = "sk-azure-secret-key"
MODELS = b'{"object":"list","data":[{"id":"azure-model","object":"model"}]}'
SSE = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"
       + b"".join(b"%x\r\n%b\r\n" % (len(e), e) for e in (
           b'data: {"choices":[{"index":0,"delta":{"content":"hi"},"finish_reason":null}]}\n\n',
           b'data: {"choices":[{"index":0,"delta":{"content":"!"},"finish_reason":"stop"}]}\n\n',
           b'data: {"choices":[],"usage":{"prompt_tokens":5,"completion_tokens":2}}\n\n',
           b"data: [DONE]\n\n"))
       + b"0\r\n\r\n")


def answer(status: str, body: bytes, extra: str = "") -> bytes:
    return (f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\n{extra}"
            "\r\n").encode() + body


class Server:
    """Keeps every request (head and body); ``reply(method, target, headers)`` says what to send:
    bytes, or a list of (bytes, pause in seconds) sent in turn."""

    def __init__(self, reply) -> None:
        self.reply = reply
        self.requests: list[tuple[str, str, dict[str, str], bytes]] = []
        self.server = StreamServer(("127.0.0.1", 0), self.handle)
        self.server.start()
        self.port = self.server.server_port
        self.url = f"http://127.0.0.1:{self.port}"

    def handle(self, sock, _addr) -> None:
        buf = b""
        try:
            while True:
                while b"\r\n\r\n" not in buf:
                    data = sock.recv(65536)
                    if not data:
                        return
                    buf += data
                head, _, buf = buf.partition(b"\r\n\r\n")
                lines = head.decode("latin-1").split("\r\n")
                method, target, _ = lines[0].split(" ", 2)
                headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
                length = int(headers.get("content-length", "0"))
                while len(buf) < length:
                    buf += sock.recv(65536)
                body, buf = buf[:length], buf[length:]
                self.requests.append((method, target, headers, body))
                out = self.reply(method, target, headers)
                for data, pause in ([(out, 0.0)] if isinstance(out, bytes) else out):
                    sock.sendall(data)
                    time.sleep(pause)
        except OSError:
            pass  # the client hung up (a cap)

    def stop(self) -> None:
        self.server.stop()


def azure(method: str, target: str, headers: dict[str, str]) -> bytes:
    """Answers only with its key in ``api-key`` and ``api-version`` in the query, as Azure OpenAI does."""
    if headers.get("api-key") != KEY or "api-version=2024-10-21" not in target or "authorization" in headers:
        return answer("401 Unauthorized", b'{"error":{"code":"401","message":"Access denied: missing api-key"}}')
    if method == "GET" and target.startswith("/v1/models?"):
        return answer("200 OK", MODELS)
    return SSE


@pytest.fixture
def servers():
    started: list[Server] = []

    def start(reply) -> Server:
        started.append(Server(reply))
        return started[-1]

    yield start
    for s in started:
        s.stop()


AZURE_OPTIONS = ClientOptions(api_key=KEY, api_key_header="api-key", query=parse_query(["api-version=2024-10-21"]))


def test_an_azure_style_target_lists_its_models_with_the_runs_key_header_and_query(servers):
    server = servers(azure)
    models = get_models(server.url, AZURE_OPTIONS)
    assert (models.status, models.error, models.json()) == (200, None, json.loads(MODELS))
    assert first_model(server.url, AZURE_OPTIONS) == "azure-model"
    bearer = get_models(server.url, ClientOptions(api_key=KEY, query=AZURE_OPTIONS.query))
    assert bearer.status == 401 and bearer.answered  # there, but it wants its own header
    assert "HTTP 401" in models_or_error(server.url, ClientOptions(api_key=KEY))["error"]
    method, target, headers, _ = server.requests[0]
    assert (method, target, headers["api-key"]) == ("GET", "/v1/models?api-version=2024-10-21", KEY)


def test_a_redirect_to_another_port_is_not_followed_with_the_key(servers):
    elsewhere = servers(azure)
    server = servers(lambda *_: answer("307 Temporary Redirect", b"", f"location: {elsewhere.url}/v1/models\r\n"))
    models = get_models(server.url, AZURE_OPTIONS)
    assert models.status == 307 and not elsewhere.requests
    assert models.error.startswith(f"HTTP 307 redirect to {elsewhere.url}/v1/models, another origin: not followed")
    assert "not followed" in models_or_error(server.url, AZURE_OPTIONS)["error"]
    assert preflight(server.url, AZURE_OPTIONS, "end", 0.0) is None  # a server that answers is there
    assert KEY not in json.dumps(models_or_error(server.url, AZURE_OPTIONS))


def test_a_redirect_on_the_same_origin_is_followed(servers):
    def moved(method, target, headers):
        if target.startswith("/v1/models?"):
            return answer("308 Permanent Redirect", b"", "location: /v2/models?api-version=2024-10-21\r\n")
        return answer("200 OK", MODELS) if headers.get("api-key") == KEY else answer("401 Unauthorized", b"{}")

    server = servers(moved)
    assert get_models(server.url, AZURE_OPTIONS).json() == json.loads(MODELS)
    assert [r[1] for r in server.requests] == ["/v1/models?api-version=2024-10-21", "/v2/models?api-version=2024-10-21"]


def test_the_body_and_the_time_are_capped(servers):
    big = servers(lambda *_: answer("200 OK", b"[" + b"0," * (1 << 20) + b"0]"))
    models = get_models(big.url, ClientOptions())
    assert models.status == 200 and len(models.body) == 1 << 20
    assert models.error == f"the answer is larger than {1 << 20} bytes; not read"
    head = b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n"
    slow = servers(lambda *_: [(head, 0.0)] + [(b" ", 0.1)] * 100)  # a byte every 0.1 s: 10 s in all
    t0 = time.monotonic()
    models = get_models(slow.url, ClientOptions(), timeout=0.5)
    assert models.error == "no answer within 0.5 s" and time.monotonic() - t0 < 3.0


def test_the_manifest_lists_the_models_of_an_azure_style_target(servers, tmp_path):
    """A real Locust run without --model: discovery and PREFIX_run.json both get the list."""
    server = servers(azure)
    prefix = tmp_path / "az"
    os.environ["LLMLOAD_API_KEY"] = KEY
    try:
        res = run_locust(["-f", SYNTHETIC, "--host", server.url, "--headless", "-u", "1", "-r", "1", "-t", "2s",
                          "--csv", str(prefix), "--steps", "1", "--step-seconds", "2", "--api-key-header", "api-key",
                          "--query", "api-version=2024-10-21", "--master-bind-port", str(free_port())], tmp_path)
    finally:
        del os.environ["LLMLOAD_API_KEY"]
    assert res.returncode == 0, res.stderr[-2000:]
    manifest = json.loads((tmp_path / "az_run.json").read_text())
    assert manifest["models"] == json.loads(MODELS) and manifest["model"] == "azure-model"
    chats = [json.loads(body) for method, _, _, body in server.requests if method == "POST"]
    assert chats and {c["model"] for c in chats} == {"azure-model"}
    assert KEY not in (tmp_path / "az_run.json").read_text()


def test_no_secret_reaches_a_message(servers):
    """The key, a secret query value and a URL's password stay out of the errors (and PREFIX_run.json)."""
    port = free_port()  # nothing listens there
    options = ClientOptions(api_key=KEY, query=parse_query(["api-key=sk-query-secret", "api-version=1"]))
    text = json.dumps(models_or_error(f"http://user:pw-secret@127.0.0.1:{port}", options))
    text += preflight(f"http://user:pw-secret@127.0.0.1:{port}", options, "end", 0.0) or ""
    assert "Connection refused" in text and "api-version=1" in text
    assert not any(s in text for s in (KEY, "sk-query-secret", "pw-secret")), text


def test_a_model_the_server_does_not_list_ends_the_run_with_one_line(mock_factory, tmp_path):
    """``--model`` (or a scenario's ``models:``) the server's /v1/models leaves out: every request would
    be refused (vLLM: 404), so the run ends at init with one line naming the flag, the name and the list."""
    mock = mock_factory("--profile", "fixed", "--model", "served-one")
    res = run_locust(["-f", CHAT, "--host", mock.url, "--headless", "-u", "1", "-r", "1", "-t", "3s",
                      "--model", "nope"], tmp_path)
    said = [line for line in res.stderr.splitlines() if "llmload: " in line]
    assert res.returncode == 1 and len(said) == 1, res.stderr[-2000:]
    assert said[0].endswith(f"llmload: --model: the server at {mock.url} does not serve model 'nope' (GET "
                            f"{mock.url}/v1/models lists served-one); every request would be refused: name one it "
                            "lists (--preflight off skips this check)"), said
    assert mock.log() == []
    scen = tmp_path / "mix.yaml"
    scen.write_text("workloads:\n  tenants:\n    models: {served-one: 0.5, adapter-x: 0.5}\n")
    res = run_locust(["-f", CHAT, "--host", mock.url, "--headless", "-u", "1", "-r", "1", "-t", "3s",
                      "--scenario", str(scen)], tmp_path)
    said = [line for line in res.stderr.splitlines() if "llmload: " in line]
    assert res.returncode == 1 and len(said) == 1 and "workloads.tenants.models: " in said[0], res.stderr[-2000:]
    assert "does not serve model 'adapter-x'" in said[0]
    # the check is skipped with the preflight: the run goes (and the mock serves any name)
    res = run_locust(["-f", CHAT, "--host", mock.url, "--headless", "-u", "1", "-r", "1", "-t", "2s",
                      "--model", "nope", "--preflight", "off", "--output-tokens", "4"], tmp_path)
    assert res.returncode == 0, res.stderr[-2000:]
