"""Plain HTTP requests to a running mock."""

from __future__ import annotations

import http.client
import json


def post(mock, path: str, body: dict, headers: dict | None = None) -> tuple[int, dict, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", mock.port, timeout=30)
    conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json", **(headers or {})})
    resp = conn.getresponse()
    data = resp.read()
    conn.close()
    return resp.status, dict(resp.getheaders()), data


def chat(max_tokens=3, **kw) -> dict:
    body = {"model": "m", "messages": [{"role": "system", "content": "be brief"},
                                       {"role": "user", "content": "say three words"}],
            "max_tokens": max_tokens, "stream": True, "stream_options": {"include_usage": True}, "ignore_eos": True}
    body.update(kw)
    return body


def sse_events(data: bytes) -> list[str]:
    text = data.decode()
    assert text.endswith("\n\n")
    return [e for e in text.split("\n\n") if e]
