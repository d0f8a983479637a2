"""The README's commands, run as written (issue 25, item 1): every `llmload` and `locust` line of its
shell blocks, against `llmload mock`, with the durations cut short and the mock's port put in for
8000. A command the README shows that fails here fails this test."""

from __future__ import annotations

import os
import re
import shlex
import signal
import subprocess
import sys
import time
import urllib.request

from tests.support.browser import wait_for
from tests.support.processes import ROOT, free_port

SHORTER = [  # (pattern, replacement): the same command, a few seconds long
    (r"(?<=\s)-t \S+", "-t 4s"),
    (r"--step-seconds \d+", "--step-seconds 5"),
    (r"--steps ([\d,]+)", lambda m: "--steps " + ",".join(m.group(1).split(",")[:2])),
]


def shell_commands(markdown: str) -> list[str]:
    """The llmload/locust lines of the fenced sh/bash blocks, continuation lines joined, comments cut."""
    out = []
    for block in re.findall(r"```(?:sh|bash|shell)\n(.*?)```", markdown, flags=re.S):
        text = re.sub(r"\\\n\s*", " ", block)
        for line in text.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line.startswith(("llmload ", "locust ")):
                out.append(line)
    return out


def adapted(command: str, port: int) -> str:
    command = command.replace("127.0.0.1:8000", f"127.0.0.1:{port}").replace("--port 8000", f"--port {port}")
    for pattern, repl in SHORTER:
        command = re.sub(pattern, repl, command)
    return command


def test_every_readme_command_runs(tmp_path):
    with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
        commands = shell_commands(f.read())
    assert any(c.startswith("llmload mock") for c in commands) and any("--headless" in c for c in commands)
    for name in ("locustfiles", "scenarios"):
        os.symlink(os.path.join(ROOT, name), tmp_path / name)
    port = free_port()
    env = {**os.environ, "PYTHONPATH": ROOT, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    background: list[subprocess.Popen] = []
    try:
        for command in commands:
            cmd = adapted(command, port)
            argv = shlex.split(cmd.removesuffix("&").strip())
            if cmd.endswith("&"):  # the mock, in the background, as the README starts it
                background.append(subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=subprocess.DEVNULL,
                                                   stderr=subprocess.PIPE, text=True))
                wait_for(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200)
            elif argv[0] == "locust" and "--headless" not in argv:  # the web UI: it must come up and answer
                web = free_port()
                proc = subprocess.Popen([*argv, "--web-host", "127.0.0.1", "--web-port", str(web)], cwd=tmp_path,
                                        env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                try:
                    wait_for(lambda w=web: urllib.request.urlopen(f"http://127.0.0.1:{w}/", timeout=2).status == 200)
                finally:
                    proc.send_signal(signal.SIGTERM)
                    proc.communicate(timeout=30)
            else:
                t0 = time.monotonic()
                res = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
                assert res.returncode == 0, f"{cmd}\n(as in the README: {command})\n{res.stderr[-3000:]}"
                assert time.monotonic() - t0 < 240
    finally:
        for p in background:
            p.terminate()
            p.communicate(timeout=30)
    assert (tmp_path / "runs" / "steps_requests.csv").exists()
