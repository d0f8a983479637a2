"""`llmload sweep` against the mock: three deployments with known capacities and prices (mock
profiles + engine flags in serve: templates), a params: matrix, two workloads; the answer, the
frontier, the archive (history, compare --baseline last); SIGTERM mid-cell, then --resume."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid

from tests.support.processes import ROOT

CLI = [sys.executable, "-m", "llmload.cli"]
MOCK = f"{sys.executable} -m llmload.cli mock --port {{port}} --profile fast --model {{marker}}"

# fast: ~4 ms per decode step. mid with 8 slots holds every step; with 2 slots 8 users queue, so it
# serves a quarter of the requests/s and needs ~4x the replicas; big is mid on 4 GPUs at a higher
# price and a 20 % slower decode step (4.8 ms: TPOT regresses, the SLO still holds); slow's 20 ms
# steps break the TPOT SLO at every load. Cheapest at 40 req/s: mid with 8 slots. The TPOT SLO stands
# 3x above mid's step: at 8 ms, a busy machine's stalls broke it at 8 users on `long`, and mid with 8
# slots then tied with 2 slots at 2 users.
PLAN = """\
slo: [ttft_p95_ms=250, tpot_p95_ms=12]
target_rps: 40
headroom: 0.3
deployments:
  slow: {{serve: "{mock} --step-base-ms 20", gpus: 1, gpu_hourly_usd: 0.5}}
  mid: {{serve: "{mock} --max-num-seqs {{max_num_seqs}}", gpus: 1, gpu_hourly_usd: 2.0}}
  big: {{serve: "{mock} --max-num-seqs 8 --step-base-ms 4.8", tp: 4, gpu_hourly_usd: 3.0}}
params: {{max_num_seqs: [2, 8]}}
workloads:
  chat: {{input_tokens: 100, output_tokens: 32}}
  long: {{input_tokens: 1000, output_tokens: 24}}
load: {{steps: [2, 8], step_seconds: 4, warmup_s: 1}}
"""


def _plan(tmp_path, marker: str, text: str = PLAN) -> str:
    path = tmp_path / "plan.yaml"
    path.write_text(text.format(mock=MOCK.replace("{marker}", marker)))
    return str(path)


def _env(tmp_path) -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": ROOT, "LLMLOAD_ARCHIVE": str(tmp_path / "runs.sqlite")}


def _servers_left(marker: str) -> list[int]:
    """Processes whose command line carries the marker (every server this test started has it)."""
    left = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read()
            with open(f"/proc/{pid}/stat", encoding="utf-8") as f:
                state = f.read().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker.encode() in cmd and b"pytest" not in cmd and state != "Z":
            left.append(int(pid))
    return left


def test_sweep_names_the_cheapest_deployment_per_workload_and_archives_it(tmp_path):
    marker = f"sweeptest-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "out"
    env = _env(tmp_path)
    done = subprocess.run([*CLI, "sweep", _plan(tmp_path, marker), "--out", str(out)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    # issue 32: the first archive write says where it is (item 20); no None on the console, capacity
    # with its unit, money with its $ (item 6)
    assert f"llmload sweep: started the run archive {tmp_path / 'runs.sqlite'}" in done.stdout
    assert not re.search(r"\b(None|nan)\b", done.stdout), done.stdout
    assert "[1/8] slow.chat.r1: done, no capacity: tpot_p95_ms" in done.stdout
    assert re.search(r"mid-max_num_seqs=8\.chat\.r1: done, capacity 8 users, \$[\d.]+ per 1M output tokens",
                     done.stdout) and "/month; runner-up " in done.stdout, done.stdout
    result = json.loads((out / "sweep.json").read_text())
    assert len(result["cells"]) == 4 * 2 and all(c["status"] == "done" for c in result["cells"])
    for workload in ("chat", "long"):
        best = result["best"][workload]
        assert best["deployment"] == "mid[max_num_seqs=8]", (workload, best)
        assert best["replicas"] >= 1 and best["gpus"] == best["replicas"]
        assert best["usd_per_month"] == round(best["gpus"] * 2.0 * 730, 2)
        assert best["runner_up"]["deployment"] in ("mid[max_num_seqs=2]", "big")
        assert "slow" not in best["considered"]  # it never met the TPOT SLO
        points = result["frontier"][workload]
        assert {p["deployment"] for p in points} >= {"mid[max_num_seqs=8]", "big"}
        assert any(p["pareto"] for p in points)
        for p in points:
            assert {"deployment", "load", "tok_s_per_gpu", "tok_s_per_user", "ttft_p95_ms",
                    "usd_per_1m_output_tokens", "pareto"} <= set(p)
    assert "Pareto frontier: chat" in (out / "sweep.md").read_text()
    assert "<svg" in (out / "sweep.html").read_text()  # the frontier drawn as the report's charts are
    assert not _servers_left(marker)

    hist = subprocess.run([*CLI, "history", "--model", marker], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=60)
    assert hist.returncode == 0 and hist.stdout.count(marker) == 8, hist.stdout
    # the newest archived run (big on long) against mid's chat cell: chat is not long, TTFT differs for real
    mid = out / "cells" / "mid-max_num_seqs=8.chat.r1" / "run"
    cmp = subprocess.run([*CLI, "compare", str(mid), "--baseline", "last", "--out", str(tmp_path / "cmp"),
                          "--warmup-s", "1"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert cmp.returncode == 0, cmp.stderr
    compared = json.loads((tmp_path / "cmp" / "compare.json").read_text())
    assert compared["runs"][0]["prefix"].endswith("big.long.r1/run")
    assert {r["verdict"] for r in compared["noise"]} >= {"real"}
    # big's decode step is 20 % slower than mid's: a real TPOT regression, beyond a 5 % gate
    gate = subprocess.run([*CLI, "compare", str(mid), str(out / "cells" / "big.chat.r1" / "run"), "--out",
                           str(tmp_path / "gate"), "--warmup-s", "1", "--fail-on-regression", "tpot_p50_ms=5"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert gate.returncode == 3, gate.stdout + gate.stderr
    assert "tpot_p50_ms" in gate.stderr and "real regression beyond 5 %" in gate.stderr
    noise = json.loads((tmp_path / "gate" / "compare.json").read_text())["noise"]
    # the size of the regression, on the median: a busy neighbour's stalls reach the p95 of either run (with a
    # busy loop on one core: +111 % at 8 users in one run, +3.5 % at 2 users in another), and a stall of the
    # mock lengthens both runs' steps alike, which shrinks the ratio: the median's regression is real at some
    # level, near the 20 % drawn, and no level reads as an improvement
    median = [r for r in noise if r["metric"] == "tpot_p50_ms"]
    assert median and all(r["pct"] > 0 for r in median), median
    assert any(r["verdict"] == "real" and 5 < r["pct"] < 40 for r in median), median


def test_sigterm_mid_cell_then_resume_reruns_nothing_finished_and_leaves_no_server(tmp_path):
    marker = f"sweeptest-{uuid.uuid4().hex[:8]}"
    small = PLAN.split("deployments:")[0] + (
        'deployments:\n  mid: {{serve: "{mock} --max-num-seqs {{max_num_seqs}}", gpus: 1, gpu_hourly_usd: 2.0}}\n'
        "params: {{max_num_seqs: [2, 4, 8]}}\nworkloads:\n  chat: {{input_tokens: 100, output_tokens: 32}}\n"
        "load: {{steps: [2, 8], step_seconds: 4, warmup_s: 1}}\n")
    plan, out, env = _plan(tmp_path, marker, small), tmp_path / "out", _env(tmp_path)
    proc = subprocess.Popen([*CLI, "sweep", plan, "--out", str(out), "--no-archive"], cwd=ROOT, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    seen = []
    assert proc.stdout is not None
    for line in proc.stdout:
        seen.append(line)
        if "[2/3]" in line:  # the second cell has begun
            break
    time.sleep(3.0)  # its server up and Locust running
    proc.send_signal(signal.SIGTERM)
    rest, _ = proc.communicate(timeout=90)
    assert proc.returncode == 128 + signal.SIGTERM, "".join(seen) + rest
    cells = out / "cells"
    first = cells / "mid-max_num_seqs=2.chat.r1" / "cell.json"
    assert json.loads(first.read_text())["status"] == "done"
    assert not (cells / "mid-max_num_seqs=4.chat.r1" / "cell.json").exists()  # stopped: no marker
    assert not _servers_left(marker), "a server outlived the stopped sweep"
    stamp = first.stat().st_mtime_ns

    again = subprocess.run([*CLI, "sweep", plan, "--out", str(out), "--resume", "--no-archive"], cwd=ROOT, env=env,
                           capture_output=True, text=True, timeout=200)
    assert again.returncode == 0, again.stdout[-3000:]
    assert "mid-max_num_seqs=2.chat.r1: done before, skipped (--resume)" in again.stdout
    assert first.stat().st_mtime_ns == stamp
    result = json.loads((out / "sweep.json").read_text())
    assert [c["status"] for c in result["cells"]] == ["done"] * 3
    assert not _servers_left(marker)
    refused = subprocess.run([*CLI, "sweep", plan, "--out", str(out), "--no-archive"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=60)
    assert refused.returncode == 2 and "--resume" in refused.stderr


def test_a_server_that_does_not_start_or_dies_fails_its_cell_and_the_sweep_moves_on(tmp_path):
    marker = f"sweeptest-{uuid.uuid4().hex[:8]}"
    py = sys.executable
    plan = (
        "slo: [ttft_p95_ms=250]\ndeployments:\n"
        '  broken: {serve: "sh -c \'echo no such model {port} >&2; exit 1\'", gpus: 1, gpu_hourly_usd: 1}\n'
        f'  dying: {{serve: "sh -c \'{py} -m llmload.cli mock --port {{port}} --profile fast --model {marker} & '
        'sleep 6; kill $!; echo engine crashed; exit 9\'", gpus: 1, gpu_hourly_usd: 1}\n'
        "workloads:\n  chat: {input_tokens: 100, output_tokens: 32}\n"
        "load: {steps: [2], step_seconds: 12, warmup_s: 1}\n")
    (tmp_path / "plan.yaml").write_text(plan)
    out = tmp_path / "out"
    done = subprocess.run([*CLI, "sweep", str(tmp_path / "plan.yaml"), "--out", str(out), "--no-archive"],
                          cwd=ROOT, env=_env(tmp_path), capture_output=True, text=True, timeout=120)
    assert done.returncode == 1, done.stdout + done.stderr  # a cell failed
    cells = {c["id"]: c for c in json.loads((out / "sweep.json").read_text())["cells"]}
    assert cells["broken.chat.r1"]["status"] == "failed"
    assert "exited with code 1 before it answered /health" in cells["broken.chat.r1"]["error"]
    assert "no such model" in cells["broken.chat.r1"]["error"]  # the log's tail
    assert cells["dying.chat.r1"]["status"] == "failed"
    assert "stopped during the cell (exit code 9)" in cells["dying.chat.r1"]["error"]
    assert "engine crashed" in cells["dying.chat.r1"]["error"]
    assert "Failed cells" in (out / "sweep.md").read_text()
    assert not _servers_left(marker)


def test_a_serve_command_that_cannot_start_fails_the_sweep_once_before_any_cell(tmp_path):
    """Issue 32, item 4: docs/sweep.md pasted with its `PY` placeholder failed all 8 cells the same
    way ("cannot start 'PY'") and still wrote sweep.json/md/html. Now: one message, no cell, exit 2."""
    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN.format(mock=MOCK.replace(sys.executable, "PY").replace("{marker}", "x")))
    out = tmp_path / "out"
    done = subprocess.run([*CLI, "sweep", str(plan), "--out", str(out), "--no-archive"], cwd=tmp_path,
                          env=_env(tmp_path), capture_output=True, text=True, timeout=60)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.splitlines()
    assert lines == [f"llmload sweep: {plan}: deployments.{d}.serve: cannot start 'PY' (no such command on PATH): "
                     f"PY -m llmload.cli mock --port {{port}} --profile fast --model x{rest}"
                     for d, rest in (("slow", " --step-base-ms 20"), ("mid", " --max-num-seqs {max_num_seqs}"),
                                     ("big", " --max-num-seqs 8 --step-base-ms 4.8"))] + [
        "llmload sweep: no cell was run; fix the serve: command(s) above"], lines
    assert "[1/" not in done.stdout and not out.exists()  # no cell, no sweep.json/md/html
    dry = subprocess.run([*CLI, "sweep", str(plan), "--dry-run"], cwd=tmp_path, env=_env(tmp_path),
                         capture_output=True, text=True, timeout=60)
    assert dry.returncode == 0 and "note: on this machine, deployments.slow.serve: cannot start 'PY'" in dry.stdout
