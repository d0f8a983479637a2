"""Bad input against real vLLM stays one clear line (the session's server of tests/support/vllm.py):

* a vLLM that is not up (nothing listens on its port): the run ends at init, one line, exit 1;
* a model name it does not serve: the run ends at init with one line naming the flag, the name and
  the models vLLM lists; with ``--preflight off`` the run goes and each row keeps vLLM's own 404
  text (``The model `nope` does not exist.``);
* a metrics URL that is not vLLM's (its ``/v1/models``, JSON): one warning, the run goes on and
  every row is written.
"""

from __future__ import annotations

from tests.support.locust_runs import CHAT, load_rows, run_locust
from tests.support.processes import free_port
from tests.support.vllm import Vllm  # the vllm_server fixture: tests/conftest.py


def _said(res) -> list[str]:
    """llmload's lines, from "llmload: " on (a logged one has Locust's prefix and the logger's name before it)."""
    return [line[line.index("llmload: "):].replace("llmload: llmload: ", "llmload: ", 1)
            for line in res.stderr.splitlines() if "llmload: " in line]


def _run(url: str, tmp_path, *args: str, seconds: str = "3s"):
    return run_locust(["-f", CHAT, "--host", url, "--headless", "-u", "1", "-r", "1", "-t", seconds,
                       "--output-tokens", "4", "--input-tokens", "20", "--stop-timeout", "20", *args], tmp_path,
                      timeout=120)


def test_a_vllm_that_is_not_up_is_one_line(tmp_path):
    url = f"http://127.0.0.1:{free_port()}"
    res = _run(url, tmp_path, "--model", "tiny")
    said = _said(res)
    assert res.returncode == 1 and len(said) == 1, res.stderr[-2000:]
    assert said[0].startswith(f"llmload: cannot reach the server at {url} (GET {url}/v1/models: "), said
    assert said[0].endswith("is it up, and is --host right? (--preflight wait waits for it, --preflight off "
                            "skips this check)")


def test_a_model_vllm_does_not_serve_is_one_line(vllm_server: Vllm, tmp_path):
    res = _run(vllm_server.url, tmp_path, "--model", "nope")
    said = _said(res)
    assert res.returncode == 1 and len(said) == 1, res.stderr[-2000:]
    assert said[0] == (f"llmload: --model: the server at {vllm_server.url} does not serve model 'nope' (GET "
                       f"{vllm_server.url}/v1/models lists {vllm_server.model}); every request would be refused: "
                       "name one it lists (--preflight off skips this check)")
    # sent anyway: every row is a failure carrying vLLM's own words
    prefix = tmp_path / "nope"
    res = _run(vllm_server.url, tmp_path, "--model", "nope", "--preflight", "off", "--csv", str(prefix),
               "--exit-code-on-error", "0", seconds="5s")  # 2 s: no request yet once, at load average 7.8
    assert res.returncode == 0, res.stderr[-2000:]
    rows = load_rows(prefix)
    assert len(rows) >= 1 and set(rows["http_status"]) == {404} and set(rows["status"]) == {"http_4xx"}
    assert rows["error"].str.contains("The model `nope` does not exist.", regex=False).all(), rows["error"][0]


def test_a_metrics_url_that_is_not_vllms_is_one_warning_and_the_run_goes_on(vllm_server: Vllm, tmp_path):
    prefix = tmp_path / "wrong_metrics"
    res = _run(vllm_server.url, tmp_path, "--model", vllm_server.model, "--csv", str(prefix), "--server-metrics",
               f"{vllm_server.url}/v1/models", "--server-metrics-interval", "0.5", seconds="4s")
    assert res.returncode == 0, res.stderr[-2000:]
    warned = f"llmload: server metrics from {vllm_server.url}/v1/models:"
    about = [line for line in _said(res) if line.startswith(warned)]
    assert len(about) == 1, _said(res)  # said once, not at every scrape
    assert "still trying every 0.5 s, without repeating this warning" in about[0], about
    rows = load_rows(prefix)
    assert len(rows) >= 2 and set(rows["status"]) == {"ok"}
