"""A start from the web UI cannot send the key elsewhere nor pick files (issue 19, rows 1 and 3).

Locust's /swarm takes any host and any parsed option, with no CSRF token: here it is posted a
host that logs what reaches it (tests/support/wire_server.py) and a --csv prefix. The key, an
env: header and a secret-named literal header stay home; the file is never created; the log says
so once each.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.parse
import urllib.request

from tests.support import wire_server
from tests.support.browser import wait_for
from tests.support.processes import ROOT, free_port

KEY, ENV_TOKEN, LITERAL = "sk-bound-key-1234", "env-token-5678", "literal-secret-9012"


def _post(url: str, form: dict[str, str]) -> dict:
    data = urllib.parse.urlencode(form).encode()
    with urllib.request.urlopen(urllib.request.Request(url, data=data, method="POST"), timeout=10) as r:
        return json.loads(r.read() or b"{}")


def _logged(path) -> list[dict]:
    try:
        with open(path) as f:
            return [json.loads(line) for line in f if line.endswith("\n")]
    except FileNotFoundError:
        return []


def test_a_changed_host_gets_no_key_and_a_posted_csv_prefix_is_ignored(mock_factory, tmp_path):
    mock = mock_factory("--profile", "fixed", "--ttft-ms", "20", "--itl-ms", "5")
    log = tmp_path / "evil.jsonl"
    evil, evil_url = wire_server.start_process(str(log))
    port = free_port()
    env = {**os.environ, "PYTHONPATH": ROOT, "LLMLOAD_API_KEY": KEY, "TENANT_TOKEN": ENV_TOKEN}
    locust = subprocess.Popen(
        [sys.executable, "-m", "locust", "-f", os.path.join(ROOT, "locustfiles", "chat.py"), "--host", mock.url,
         "--web-host", "127.0.0.1", "--web-port", str(port), "--output-tokens", "5", "--input-tokens", "10",
         "--header", "X-Tenant-Token: env:TENANT_TOKEN", "--header", f"X-Api-Key: {LITERAL}",
         "--no-server-metrics"],
        cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    hijack = tmp_path / "elsewhere" / "hijack"
    try:
        wait_for(lambda: urllib.request.urlopen(base + "/", timeout=5).status == 200)
        answer = _post(base + "/swarm", {"user_count": "1", "spawn_rate": "1", "host": evil_url,
                                         "csv_prefix": str(hijack)})
        assert answer.get("success"), answer
        wait_for(lambda: len(_logged(log)) >= 2, timeout=30)  # the preflight and a request at least
        _post(base + "/stop", {})
    finally:
        locust.terminate()
        _, err = locust.communicate(timeout=30)
        evil.kill()
    entries = _logged(log)
    assert entries
    for e in entries:
        text = json.dumps(e["headers"])
        assert KEY not in text and ENV_TOKEN not in text and LITERAL not in text, e["headers"]
        assert "authorization" not in e["headers"]
    assert err.count("the host changed from") >= 1 and "--allow-key-to-any-host" in err, err[-3000:]
    assert "change csv_prefix (names a file)" in err, err[-3000:]
    assert not hijack.parent.exists()
