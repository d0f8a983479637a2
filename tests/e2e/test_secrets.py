"""The API key (and any secret header) never leaves the processes that send it to the server:
not in CSVs, PREFIX_run.json, reports, logs, the web UI's pages, nor the master↔worker traffic.

A master (web UI on, autostarted) and two workers on hosts of their own (tests/netns.py); a
sniffer in the master's namespace records every frame on its cable (all ZeroMQ traffic), another
one on the mock's (where the key must appear: it proves the sniffers see the traffic). Then every
file the run wrote, every process's output, each web page and both captures are searched for each
secret, whole and in 12-character pieces (a frame boundary can split a value).

A literal secret header is given on the command line of the master and of each worker (the
master never ships its value: each worker sends its own). To test another secret, add one line to
SECRETS and its flag to SECRET_ARGS, e.g. ``"TENANT_KEY": "tk-..."`` and
``"--header", "X-Tenant: env:TENANT_KEY"``.
"""

from __future__ import annotations

import os
import secrets
import socket
import subprocess
import time

from tests.support.locust_runs import CHAT, LOCUST
from tests.support.multihost import MASTER_PORT, MOCK_PORT, PY, read_log, topology
from tests.support.netns import SPAWNED, wait_for_text
from tests.support.processes import ROOT

SECRETS = {
    "OPENAI_API_KEY": "sk-llmload-" + secrets.token_hex(16),
    "LITERAL_HEADER": "lit-" + secrets.token_hex(16),  # given on the command line, to the master and each worker
}
SECRET_ARGS: list[str] = ["--header", f"X-Api-Key: {SECRETS['LITERAL_HEADER']}"]
WEB_PORT = 8089

SNIFF = """
import socket, sys
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.ntohs(3))
s.bind((sys.argv[1], 0))
out = open(sys.argv[2], "ab", buffering=0)
print("sniffing", flush=True)
while True:
    frame = s.recv(65535)
    out.write(len(frame).to_bytes(4, "big") + frame)
"""
PAGES = ("/", "/stats/requests", "/stats/report", "/llmload/dashboard", "/llmload/live.json",
         "/llmload/history.json", "/llmload/metrics.json", "/llmload/requests.csv", "/llmload/llm_stats.csv",
         "/llmload/history.csv")
FETCH = """
import sys, urllib.request
for path in sys.argv[2:]:
    try:
        body = urllib.request.urlopen(sys.argv[1] + path, timeout=10).read()
    except Exception as e:
        body = repr(e).encode()
    sys.stdout.buffer.write(b"=== " + path.encode() + b"\\n" + body + b"\\n")
"""


def frames_of(path: str, host: str | None = None, not_with: str | None = None) -> bytes:
    """The captured Ethernet frames, joined: with ``host``, only IPv4 to or from it, and with
    ``not_with``, not those between ``host`` and that address."""
    with open(path, "rb") as f:
        data = f.read()
    out, i = [], 0
    want = socket.inet_aton(host) if host else None
    other = socket.inet_aton(not_with) if not_with else None
    while i + 4 <= len(data):
        n = int.from_bytes(data[i:i + 4], "big")
        frame = data[i + 4:i + 4 + n]
        i += 4 + n
        # Ethernet (14 bytes), then IPv4: source at 12-16, destination at 16-20 of the IP header.
        ends = (frame[26:30], frame[30:34]) if frame[12:14] == b"\x08\x00" else ()
        if want is None or (want in ends and other not in ends):
            out.append(frame)
    return b"".join(out)


def pieces(value: str, n: int = 12) -> list[bytes]:
    raw = value.encode()
    return [raw] + [raw[i:i + n] for i in range(0, len(raw) - n + 1, n // 2)]


def leaks(blob: bytes) -> list[str]:
    return [name for name, value in SECRETS.items() if any(p in blob for p in pieces(value))]


def test_secrets_appear_nowhere_but_on_the_way_to_the_server(tmp_path):
    env = {**os.environ, "PYTHONPATH": ROOT, **SECRETS}
    quiet_env = {k: v for k, v in env.items() if k not in SECRETS}  # the mock needs no key
    with topology(["master", "w1", "w2", "mock"], tmp_path) as topo:
        caps = {h: str(tmp_path / f"{h}.frames") for h in ("master", "mock")}
        for host, cap in caps.items():
            sniffer = topo.popen(host, [PY, "-c", SNIFF, "eth0", cap])
            wait_for_text(sniffer.log_path, "sniffing", 10, sniffer)
        mock_url = f"http://{topo.addr('mock')}:{MOCK_PORT}"
        mock = topo.popen("mock", [PY, "-m", "llmload.cli", "mock", "--host", topo.addr("mock"), "--port",
                                   str(MOCK_PORT), "--profile", "fixed", "--ttft-ms", "20", "--itl-ms", "5"],
                          env=quiet_env, cwd=ROOT)
        wait_for_text(mock.log_path, "listening on", 30, mock)
        prefix = str(tmp_path / "sec")
        master_addr, mock_addr = topo.addr("master"), topo.addr("mock")
        master = topo.popen("master", [*LOCUST, "-f", CHAT, "--master", "--master-bind-host", topo.addr("master"),
                                       "--master-bind-port", str(MASTER_PORT), "--expect-workers", "2",
                                       "--web-host", topo.addr("master"), "--web-port", str(WEB_PORT),
                                       "--autostart", "--autoquit", "3", "-u", "4", "-r", "4", "-t", "8s",
                                       "--csv", prefix, "--host", mock_url, "--output-tokens", "20",
                                       "--loglevel", "DEBUG", *SECRET_ARGS], env=env, cwd=tmp_path)
        workers = [topo.popen(w, [*LOCUST, "-f", CHAT, "--worker", "--master-host", topo.addr("master"),
                                  "--master-port", str(MASTER_PORT), "--loglevel", "DEBUG", *SECRET_ARGS], env=env,
                                 cwd=tmp_path)
                   for w in ("w1", "w2")]
        wait_for_text(master.log_path, SPAWNED, 60, master)
        time.sleep(4)  # a few reports and live samples
        base = f"http://{topo.addr('master')}:{WEB_PORT}"
        pages = topo.run("w1", [PY, "-c", FETCH, base, *PAGES], timeout=60).stdout
        assert "=== /llmload/live.json" in pages and '"rows"' in pages, pages[:2000]
        master.wait(60)
        for w in workers:
            w.wait(30)
        time.sleep(0.5)
        outputs = {p.host + str(i): read_log(p) for i, p in enumerate([master, *workers])}
    report = subprocess.run([PY, "-m", "llmload.cli", "report", prefix, "--out", str(tmp_path / "report")],
                            capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert report.returncode == 0, report.stderr
    # Only master <-> worker traffic: the master itself asks the server for its models (with the
    # key, as it must), and its cable carries a worker's first frames to the mock while the bridge
    # is still learning where the mock is.
    master_frames = frames_of(caps["master"], master_addr, not_with=mock_addr)
    mock_frames = frames_of(caps["mock"])
    # The captures see the traffic: ZeroMQ messages on the master's cable, the key on the mock's.
    assert b"llmload_sent" in master_frames and b"llmload_final" in master_frames
    assert f"Bearer {SECRETS['OPENAI_API_KEY']}".encode() in mock_frames
    assert f"X-Api-Key: {SECRETS['LITERAL_HEADER']}".encode() in mock_frames  # the workers' own, as they send it
    assert "LLM summary" in outputs["master0"] and os.path.exists(f"{prefix}_requests.csv")
    found: dict[str, list[str]] = {}
    for base_dir, _dirs, files in os.walk(tmp_path):
        for name in files:
            path = os.path.join(base_dir, name)
            if path in caps.values():
                continue
            with open(path, "rb") as f:
                if hit := leaks(f.read()):
                    found[os.path.relpath(path, tmp_path)] = hit
    for name, blob in [("web pages", pages.encode()), ("master→worker frames", master_frames),
                       ("report stdout", (report.stdout + report.stderr).encode()),
                       *((f"output of {k}", v.encode()) for k, v in outputs.items())]:
        if hit := leaks(blob):
            found[name] = hit
    assert not found, f"secrets found in: {found}"
    written = sorted(os.listdir(tmp_path))
    assert "sec_requests.csv" in written and "sec_requests.worker0.csv" in written and "report" in written
