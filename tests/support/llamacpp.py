"""Fixtures: a real llama.cpp ``llama-server`` on a free port of 127.0.0.1, serving the tiny
random-weight model of ``scripts/llama_server.py``; plus raw-socket helpers to see its bytes.

The server has ``N_SLOTS`` parallel slots of ``CTX_PER_SLOT`` tokens each, ``--metrics`` on and
the prompt cache on (a repeated prefix comes back as ``prompt_tokens_details.cached_tokens``).
The tiny model practically never ends a reply by itself, so every stream runs to ``max_tokens``.

The build happens once per machine (``make llama-server``, or here on first use, ~7 min). It
never skips silently: a failed build fails the tests with the build log's tail. Outside CI,
``LLMLOAD_SKIP_LLAMACPP=1`` skips them instead.

Usage::

    from tests.support.llamacpp import llama_server_fixture, tiny_model_fixture  # noqa: F401  (the fixtures)

    def test_x(llama_server):
        status, head, body = llama_server.get("/metrics")
"""

from __future__ import annotations

import json
import socket
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from scripts.llama_server import (
    LlamaServerError,
    server_args,
    start_llama_server,
    stop_llama_server,
    write_tiny_model,
)
from tests.support.llamacpp_binary import build_or_fail

SHARED_SERVER = "llama"  # tests/conftest.py: every test of these fixtures on one xdist worker, one server
PREPARED_BY = "llama_server"  # scripts/test_suite.py: the build these fixtures wait for
N_SLOTS = 4
CTX_PER_SLOT = 4096  # room for a ~2,500-token prompt plus its reply in every slot
MODEL_ALIAS = "tiny-llama"
SERVER_ARGS = server_args(N_SLOTS, CTX_PER_SLOT, MODEL_ALIAS)


def raw_exchange(url: str, method: str, path: str, body: bytes | None = None, timeout: float = 60.0) -> bytes:
    """One request on a fresh connection (``Connection: close``); every byte of the response
    exactly as received, head and (chunked) body, until the server closes."""
    host, port = url.removeprefix("http://").split(":")
    head = [f"{method} {path} HTTP/1.1", f"Host: {host}:{port}", "Connection: close", "User-Agent: llmload"]
    if body is not None:
        head += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    data = ("\r\n".join(head) + "\r\n\r\n").encode() + (body or b"")
    out = bytearray()
    deadline = time.monotonic() + timeout
    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        s.sendall(data)
        while time.monotonic() < deadline:
            part = s.recv(65536)
            if not part:
                return bytes(out)
            out += part
    raise TimeoutError(f"{method} {path}: no end of response within {timeout:.0f} s")


def split_response(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    """Status, headers (lower-case names) and the de-chunked body of a raw HTTP/1.1 response."""
    head, _, rest = raw.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    status = int(lines[0].split()[1])
    headers = {k.strip().lower(): v.strip() for k, v in (ln.split(":", 1) for ln in lines[1:])}
    if headers.get("transfer-encoding", "").lower() != "chunked":
        return status, headers, rest
    body = bytearray()
    while rest:
        size_line, _, rest = rest.partition(b"\r\n")
        size = int(size_line.split(b";")[0], 16)
        if size == 0:
            break
        body += rest[:size]
        rest = rest[size + 2:]
    return status, headers, bytes(body)


def sse_events(body: bytes) -> list[str]:
    """The ``data:`` payloads of an SSE body, in order."""
    return [line[5:].strip() for line in body.decode().splitlines() if line.startswith("data:")]


@dataclass
class LlamaServer:
    url: str
    proc: subprocess.Popen
    model: Path
    binary: Path
    log_path: Path
    n_slots: int = N_SLOTS
    ctx_per_slot: int = CTX_PER_SLOT
    model_alias: str = MODEL_ALIAS

    def request(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict[str, str], bytes]:
        raw = raw_exchange(self.url, method, path, None if body is None else json.dumps(body).encode())
        return split_response(raw)

    def get(self, path: str) -> tuple[int, dict[str, str], bytes]:
        return self.request("GET", path)

    def post_json(self, path: str, body: dict) -> dict:
        status, _, data = self.request("POST", path, body)
        assert status == 200, f"POST {path}: {status} {data[:300]!r}"
        return json.loads(data)

    def chat_tokens(self, messages: list[dict]) -> list[int]:
        """The token ids the server will see for these chat messages (its template, its tokenizer)."""
        prompt = self.post_json("/apply-template", {"messages": messages})["prompt"]
        return self.post_json("/tokenize", {"content": prompt, "add_special": True, "parse_special": True})["tokens"]

    def metrics(self) -> dict[str, float]:
        """``/metrics`` as {name: value} (names without the ``llamacpp:`` prefix)."""
        status, _, body = self.get("/metrics")
        assert status == 200, body[:200]
        out = {}
        for line in body.decode().splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name.removeprefix("llamacpp:")] = float(value)
        return out


@pytest.fixture(scope="session", name="tiny_model")
def tiny_model_fixture(tmp_path_factory) -> Path:
    return write_tiny_model(tmp_path_factory.mktemp("llamacpp") / "tiny-llama.gguf")


@pytest.fixture(scope="session", name="llama_server")
def llama_server_fixture(tiny_model) -> Iterator[LlamaServer]:
    binary = build_or_fail()
    log_path = tiny_model.with_name("llama-server.log")
    try:
        proc, url = start_llama_server(tiny_model, 0, SERVER_ARGS, binary=binary, log_path=log_path)
    except LlamaServerError as e:
        pytest.fail(f"llama-server did not start: {e}", pytrace=False)
    server = LlamaServer(url=url, proc=proc, model=tiny_model, binary=binary, log_path=log_path)
    yield server
    stop_llama_server(proc)
