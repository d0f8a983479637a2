"""Record llama-server's real bytes for the compatibility fixtures in tests/fixtures/real/llamacpp/.

Each exchange is saved as ``NAME.request.http`` (the bytes sent) and ``NAME.response.http``
(head and chunked body exactly as received, read from a raw socket until the server closed).
The server is the one the tests use (tiny model, 4 slots of 4096 tokens, --metrics).

Usage::

    .venv/bin/python -m tests.support.capture_llamacpp tests/fixtures/real/llamacpp
"""

from __future__ import annotations

import json
import sys
import tempfile
from pathlib import Path

from scripts.llama_server import (
    LLAMA_CPP_COMMIT,
    SDIST_NAME,
    SDIST_VERSION,
    ensure_llama_server,
    start_llama_server,
    stop_llama_server,
    write_tiny_model,
)
from tests.support.llamacpp import CTX_PER_SLOT, MODEL_ALIAS, SERVER_ARGS, raw_exchange, split_response


def overflow_prompt(n_words: int = 1200) -> str:
    """~6,000 tokens with the tiny vocabulary: past one slot's context."""
    return " ".join(f"w{i % 97}x" for i in range(n_words))


def exchanges() -> list[tuple[str, str, str, dict | None]]:
    chat = {"model": MODEL_ALIAS, "messages": [{"role": "user", "content": "Say hello."}], "max_tokens": 8,
            "stream": True, "temperature": 0}
    return [
        ("chat_stream_include_usage", "POST", "/v1/chat/completions",
         {**chat, "stream_options": {"include_usage": True}}),
        ("chat_stream_no_usage", "POST", "/v1/chat/completions", chat),
        # The same prompt a third time: its tokens are in a slot's cache, so usage reports them.
        ("chat_stream_cached_prefix", "POST", "/v1/chat/completions",
         {**chat, "stream_options": {"include_usage": True}}),
        ("completions_stream", "POST", "/v1/completions",
         {"model": MODEL_ALIAS, "prompt": "Once upon a time", "max_tokens": 8, "stream": True, "temperature": 0}),
        ("error_context_overflow", "POST", "/v1/chat/completions",
         {**chat, "messages": [{"role": "user", "content": overflow_prompt()}],
          "stream_options": {"include_usage": True}}),
        ("metrics", "GET", "/metrics", None),
    ]


def request_bytes(url: str, method: str, path: str, body: bytes | None) -> bytes:
    """The request exactly as raw_exchange sends it."""
    host = url.removeprefix("http://")
    head = [f"{method} {path} HTTP/1.1", f"Host: {host}", "Connection: close", "User-Agent: llmload"]
    if body is not None:
        head += ["Content-Type: application/json", f"Content-Length: {len(body)}"]
    return ("\r\n".join(head) + "\r\n\r\n").encode() + (body or b"")


def capture(out_dir: Path) -> list[str]:
    out_dir.mkdir(parents=True, exist_ok=True)
    binary = ensure_llama_server()
    with tempfile.TemporaryDirectory(prefix="llamacpp-capture-") as tmp:
        model = write_tiny_model(Path(tmp) / "tiny-llama.gguf")
        proc, url = start_llama_server(model, 0, SERVER_ARGS, binary=binary, log_path=Path(tmp) / "server.log")
        lines = []
        try:
            for name, method, path, body in exchanges():
                data = None if body is None else json.dumps(body, separators=(",", ":")).encode()
                raw = raw_exchange(url, method, path, data)
                (out_dir / f"{name}.request.http").write_bytes(request_bytes(url, method, path, data))
                (out_dir / f"{name}.response.http").write_bytes(raw)
                status, headers, _ = split_response(raw)
                lines.append(f"{name}: {method} {path} -> {status} {headers.get('content-type', '')}, "
                             f"{len(raw)} bytes")
        finally:
            stop_llama_server(proc)
    lines.append(f"llama.cpp {LLAMA_CPP_COMMIT} from {SDIST_NAME} {SDIST_VERSION}; server args: "
                 f"{' '.join(SERVER_ARGS)} (context {CTX_PER_SLOT} per slot)")
    return lines


if __name__ == "__main__":
    for line in capture(Path(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/real/llamacpp")):
        print(line)
