"""`llmload sweep` against real llama.cpp servers: two quantisations of the tiny random-weight
model (F16 and Q8_0, both written here with the ``gguf`` package) × two slot counts
(``--parallel``), each cell a llama-server started by the plan's ``serve:`` template. Every cell
completes, sweep.json has the frontier and an answer, and the Q8_0 file really is smaller."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import gguf

from scripts.llama_server import write_tiny_model
from tests.support.llamacpp_binary import llama_binary_fixture  # noqa: F401  (the fixture)
from tests.support.processes import ROOT

# --no-repack: this llama.cpp's CPU repack of Q8_0 weights crashes on matrices this small (see
# write_tiny_model); both quantisations get it, so the cells differ only in weights and slots.
SERVE = ("{binary} -m {model} --host 127.0.0.1 --port {{port}} --no-webui --parallel {{parallel}} "
         "-c 8192 --threads 1 --no-repack --alias tiny-llama")
PLAN = """\
slo: [ttft_p95_ms=5000]
target_rps: 20
deployments:
  f16: {{serve: "{f16}", health: /health, start_timeout_s: 60, gpus: 1, gpu_hourly_usd: 1.0}}
  q8_0: {{serve: "{q8}", health: /health, start_timeout_s: 60, gpus: 1, gpu_hourly_usd: 0.8}}
params: {{parallel: [1, 2]}}
workloads:
  chat: {{input_tokens: 32, output_tokens: 8}}
load: {{steps: [1, 2], step_seconds: 6, warmup_s: 1}}
"""


def _tensor_types(path) -> set[str]:
    """The types of the model's weight matrices (the norms are f32 in every file)."""
    return {t.tensor_type.name for t in gguf.GGUFReader(str(path)).tensors if len(t.shape) == 2}


def test_a_sweep_of_two_quantisations_and_two_slot_counts(llama_binary, tmp_path):
    f16 = write_tiny_model(tmp_path / "tiny-f16.gguf", weights="F16")
    q8 = write_tiny_model(tmp_path / "tiny-q8_0.gguf", weights="Q8_0")
    assert _tensor_types(f16) == {"F16"} and _tensor_types(q8) == {"Q8_0"}
    assert os.path.getsize(q8) < 0.6 * os.path.getsize(f16), (os.path.getsize(q8), os.path.getsize(f16))

    plan = tmp_path / "plan.yaml"
    plan.write_text(PLAN.format(f16=SERVE.format(binary=llama_binary, model=f16),
                                q8=SERVE.format(binary=llama_binary, model=q8)))
    out = tmp_path / "sweep"
    res = subprocess.run([sys.executable, "-m", "llmload.cli", "sweep", str(plan), "--out", str(out),
                          "--no-archive"], cwd=ROOT, env={**os.environ, "PYTHONPATH": ROOT}, capture_output=True,
                         text=True, timeout=600)
    assert res.returncode == 0, res.stdout[-3000:] + res.stderr[-3000:]
    data = json.loads((out / "sweep.json").read_text())
    cells = {c["deployment"]: c for c in data["cells"]}
    assert set(cells) == {"f16[parallel=1]", "f16[parallel=2]", "q8_0[parallel=1]", "q8_0[parallel=2]"}, list(cells)
    for name, c in cells.items():
        assert c["status"] == "done", (name, c.get("error"))
        assert [s["users"] for s in c["steps"]] == [1, 2] and all(s["ok"] > 0 for s in c["steps"]), c["steps"]
        log = (out / "cells" / c["id"] / "server.log").read_text(errors="replace")
        assert ("tiny-q8_0.gguf" if name.startswith("q8_0") else "tiny-f16.gguf") in log
    points = data["frontier"]["chat"]  # every step with a verdict (>= 30 ok requests) of every cell
    judged = {name for name, c in cells.items() if any(s["ok"] >= 30 for s in c["steps"])}  # a loaded machine
    assert judged and {p["deployment"] for p in points} == judged and any(p["pareto"] for p in points), points
    assert all(p["tok_s_per_gpu"] > 0 and p["usd_per_1m_output_tokens"] > 0 for p in points), points
    assert data["best"]["chat"]["deployment"] in cells, data["best"]
    text = (out / "sweep.md").read_text()
    assert "Pareto frontier: chat" in text and "The answer" in text
