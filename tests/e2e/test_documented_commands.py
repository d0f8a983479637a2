"""The documented commands, run as written (issue 25, item 1): every `llmload` and `locust` line of
the shell blocks of the README and the usage pages of docs/, in their order, in one working
directory (a page may use the runs an earlier one made), against `llmload mock`: one mock per
address a page names (127.0.0.1:PORT, or a server host like gpu-box:PORT), the durations cut short.
A command the docs show that fails here fails this test, naming its page.

Blocks fenced as ``text`` are synopses (``[--flag]``), not commands. docs/distributed.md's commands
need several hosts and are run by the multi-host tests (tests/real/test_multihost_*.py). A block
that writes a file (a heredoc) is a whole script, run as it is written by a test of its own
(docs/sweep.md's sweep: :func:`test_the_sweep_example_runs_as_written`).
"""

from __future__ import annotations

import json
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
from tests.support.second_reading import measured_twice

PAGES = ("README.md", "docs/benchmarks.md", "docs/report.md", "docs/live-view.md", "docs/servers.md",
         "docs/sweep.md", "docs/calibrate.md", "docs/mock.md")
SHORTER = [  # (pattern, replacement): the same command, a few seconds long
    (r"(?<=\s)-t \S+", "-t 4s"),
    (r"--step-seconds \d+", "--step-seconds 5"),
    (r"--steps ([\d,]+)", lambda m: "--steps " + ",".join(m.group(1).split(",")[:2])),
    (r"--search-max \d+", "--search-max 16"),
    (r"--search-precision \d+", "--search-precision 8"),
    (r"--autoquit \d+", "--autoquit 1"),
]
ADDRESS = re.compile(r"(?:127\.0\.0\.1|localhost|gpu-box):(\d+)")


def shell_commands(markdown: str) -> list[str]:
    """The llmload/locust lines of the fenced sh/bash blocks, continuation lines joined, comments cut."""
    out = []
    for block in re.findall(r"```(?:sh|bash|shell)\n(.*?)```", markdown, flags=re.S):
        if "<<" in block:  # a script that writes its own files: run whole, not line by line
            continue
        text = re.sub(r"\\\n\s*", " ", block)
        for line in text.splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line.startswith(("llmload ", "locust ")):
                out.append(line)
    return out


def adapted(command: str, ports: dict[str, int]) -> str:
    """The command against this test's mocks: each documented port mapped to a free one."""
    command = ADDRESS.sub(lambda m: f"127.0.0.1:{ports.setdefault(m.group(1), free_port())}", command)
    command = re.sub(r"--port (\d+)", lambda m: f"--port {ports.setdefault(m.group(1), free_port())}", command)
    for pattern, repl in SHORTER:
        command = re.sub(pattern, repl, command)
    return command


def test_the_synopsis_blocks_are_not_shell_blocks():
    for page in PAGES:
        with open(os.path.join(ROOT, page), encoding="utf-8") as f:
            for line in shell_commands(f.read()):
                assert "[--" not in line, f"{page}: a synopsis in a sh block (fence it as text): {line}"


def test_the_live_view_says_how_the_web_ui_quits_after_its_run(mock_factory, tmp_path):
    """-t ends the test, not the web UI (issue 32, item 17): the page's own command with --autoquit
    quits by itself once its run is done."""
    with open(os.path.join(ROOT, "docs/live-view.md"), encoding="utf-8") as f:
        (command,) = [c for c in shell_commands(f.read()) if "--autoquit" in c]
    mock = mock_factory()
    port = mock.url.rsplit(":", 1)[1]
    argv = shlex.split(adapted(command, {p: int(port) for p in ADDRESS.findall(command)}))
    argv[argv.index("--autoquit") + 1] = "1"
    for name in ("locustfiles", "scenarios"):
        os.symlink(os.path.join(ROOT, name), tmp_path / name)
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-m", *argv, "--web-host", "127.0.0.1", "--web-port", str(free_port())],
                         cwd=tmp_path, env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True, text=True,
                         timeout=120)
    assert res.returncode == 0 and time.monotonic() - t0 < 60, res.stderr[-3000:]
    assert "-t 4s" in " ".join(argv) and "--autostart" in argv


def test_every_documented_command_runs(tmp_path):
    for name in ("locustfiles", "scenarios"):
        os.symlink(os.path.join(ROOT, name), tmp_path / name)
    env = {**os.environ, "PYTHONPATH": ROOT, "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    ports: dict[str, int] = {}  # documented port → this test's
    mocks: dict[int, subprocess.Popen] = {}
    ran: list[str] = []
    done: set[str] = set()  # a command two pages show alike, as adapted here, runs once (same text, same files)

    def mock_on(port: int, argv: list[str] | None = None) -> None:
        if port not in mocks:
            mocks[port] = subprocess.Popen(argv or [sys.executable, "-m", "llmload.cli", "mock", "--port", str(port)],
                                           cwd=tmp_path, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                           text=True)
            wait_for(lambda: urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2).status == 200)

    try:
        for page in PAGES:
            with open(os.path.join(ROOT, page), encoding="utf-8") as f:
                commands = shell_commands(f.read())
            if page == "README.md":
                assert any(c.startswith("llmload mock") for c in commands)
                assert any("--headless" in c for c in commands)
            for command in commands:
                cmd = adapted(command, ports)
                argv = shlex.split(cmd.removesuffix("&").strip())
                where = f"{cmd}\n(as in {page}: {command})"
                if cmd in done:
                    ran.append(page)
                    continue
                done.add(cmd)
                if argv[:2] == ["llmload", "mock"]:  # the page starts its own mock: as it says
                    mock_on(int(argv[argv.index("--port") + 1]) if "--port" in argv else 8000, argv)
                    continue
                for port in {int(p) for p in re.findall(r"127\.0\.0\.1:(\d+)", cmd)}:
                    mock_on(port)
                if argv[0] == "locust" and "--autoquit" in argv:  # the web UI that quits by itself: it must
                    argv += ["--web-host", "127.0.0.1", "--web-port", str(free_port())]
                if argv[0] == "locust" and "--headless" not in argv and "--autoquit" not in argv:  # the web UI: it
                    # must come up and answer
                    web = free_port()
                    proc = subprocess.Popen([*argv, "--web-host", "127.0.0.1", "--web-port", str(web)], cwd=tmp_path,
                                            env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
                    try:
                        wait_for(lambda w=web: urllib.request.urlopen(f"http://127.0.0.1:{w}/", timeout=2).status
                                 == 200, timeout=60)
                    finally:
                        proc.send_signal(signal.SIGTERM)
                        proc.communicate(timeout=30)
                else:
                    t0 = time.monotonic()
                    res = subprocess.run(argv, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
                    assert res.returncode == 0, f"{where}\n{res.stdout[-1500:]}\n{res.stderr[-3000:]}"
                    assert time.monotonic() - t0 < 240, where
                ran.append(page)
    finally:
        for p in mocks.values():
            p.terminate()
            p.communicate(timeout=30)
    assert (tmp_path / "runs" / "steps_requests.csv").exists()
    assert {"README.md", "docs/benchmarks.md", "docs/report.md", "docs/live-view.md", "docs/servers.md"} <= set(ran)


def test_the_sweep_example_runs_as_written(tmp_path):
    """Issue 32, item 4: docs/sweep.md's example had a `PY` placeholder, so pasted literally every cell
    failed. Its block is now a script with nothing to fill in: run exactly that text, and it must name
    the best deployment per workload that the page's sweep.md shows."""
    with open(os.path.join(ROOT, "docs/sweep.md"), encoding="utf-8") as f:
        page = f.read()
    blocks = [b for b in re.findall(r"```sh\n(.*?)```", page, flags=re.S) if "llmload sweep docsweep/" in b]
    assert len(blocks) == 1, blocks
    assert "PY " not in blocks[0] and "BIN" not in blocks[0]
    shown = page[page.index(blocks[0]):]
    answer = shown[shown.index("## The answer"):shown.index("## Pareto frontier")]
    rows = [[c.strip() for c in line.strip().split("|")] for line in answer.splitlines()
            if line.strip().startswith("|")]
    expected = {r[1]: r[2] for r in rows if r[1] not in ("workload", "---")}
    assert expected == {"chat": "mid[max_num_seqs=8]", "long": "mid[max_num_seqs=8]"}, expected
    env = {**os.environ, "PYTHONPATH": ROOT, "LLMLOAD_ARCHIVE": "off",
           "PATH": os.path.dirname(sys.executable) + os.pathsep + os.environ["PATH"]}
    # The answer is measured: on a host kept busy beside the suite, the mock's 8-user step of
    # mid[max_num_seqs=8] once read a TPOT p95 of 18.6 ms against the example's 8-ms SLO (4.2 ms
    # quiet), and chat's answer became mid[max_num_seqs=2]. A second run in a new directory then;
    # what this test guards (a block that cannot run as written, an answer that is not the page's
    # for a reason of the code's) fails both.
    def measure(work):
        res = subprocess.run(["bash", "-e", "-c", blocks[0]], cwd=work, env=env, capture_output=True, text=True,
                             timeout=480)
        assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
        with open(work / "docsweep" / "out" / "sweep.json", encoding="utf-8") as f:
            return res, {w: b["deployment"] for w, b in json.load(f)["best"].items()}

    (res, best), _ = measured_twice(tmp_path, measure, lambda r: None if r[1] == expected else
                                    f"{r[1]} where the page shows {expected}\n{r[0].stdout[-3000:]}")
    assert best == expected, res.stdout[-3000:]
