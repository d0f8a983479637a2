"""What one scrape of a server's /metrics costs the load generator, per engine.

Serves each engine's fixture body (tests/fixtures/metrics: vLLM with two data-parallel engines,
SGLang, TGI, llama.cpp, TensorRT-LLM) and a live `llmload mock` body in each of its formats
from another process, then runs the scraper's own tick (fetch, parse in slices between loop turns, map,
write the CSV rows, fold into the live series) against it many times. Prints per body: bytes,
CSV rows per scrape, wall ms per scrape, CPU ms per scrape (this process, every thread) and the
longest the event loop went without turning during a scrape.

    python benchmarks/scrape_cost.py [--scrapes 50]
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import os  # noqa: E402
import re  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
import urllib.request  # noqa: E402

import gevent  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from llmload.server_metrics.scrape import ServerMetricsScraper  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
FIXTURES = os.path.join(ROOT, "tests", "fixtures", "metrics")


def fixture_bodies() -> dict[str, bytes]:
    out = {}
    for engine in ("vllm", "sglang", "tgi", "llamacpp", "trtllm"):
        with open(os.path.join(FIXTURES, f"{engine}.prom"), encoding="utf-8") as f:
            text = f.read()
        parts = re.split(r"^# SNAPSHOT t=[0-9.]+\n", text, flags=re.M)
        out[f"{engine} (fixture)"] = parts[-1].encode()
    return out


def mock_bodies() -> dict[str, bytes]:
    """The mock's /metrics in each format, after some traffic (so histograms are filled)."""
    from llmload.mock.launch import start_mock_process, stop_mock_process

    out = {}
    for fmt in ("vllm", "sglang", "tgi"):
        proc, url = start_mock_process(["--profile", "fast", "--metrics-format", fmt], cwd=ROOT)
        try:
            body = b'{"model":"m","messages":[{"role":"user","content":"hi there"}],"max_tokens":8,"ignore_eos":true}'
            for _ in range(20):
                req = urllib.request.Request(url + "/v1/chat/completions", data=body,
                                             headers={"Content-Type": "application/json"})
                urllib.request.urlopen(req, timeout=10).read()
            out[f"mock --metrics-format {fmt}"] = urllib.request.urlopen(url + "/metrics", timeout=10).read()
        finally:
            stop_mock_process(proc)
    return out


def measure(url: str, scrapes: int, csv_path: str) -> tuple[float, float, float, int]:
    scraper = ServerMetricsScraper([url], interval_s=5.0, csv_path=csv_path)
    gaps: list[float] = []
    last = [time.perf_counter()]

    def ticker() -> None:
        last[0] = time.perf_counter()  # not from before the warm-up tick
        while True:
            gevent.sleep(0.005)
            now = time.perf_counter()
            gaps.append(now - last[0])
            last[0] = now

    scraper.tick(time.time())  # warm: the connection path
    rows0 = scraper.rows_written
    tick = gevent.spawn(ticker)
    wall = cpu = 0.0
    for _ in range(scrapes):
        w0, c0 = time.perf_counter(), time.process_time()
        scraper.tick(time.time())
        wall += time.perf_counter() - w0
        cpu += time.process_time() - c0
    tick.kill()
    scraper.stop()
    assert scraper.failures == 0, url
    return wall / scrapes * 1e3, cpu / scrapes * 1e3, max(gaps, default=0.0) * 1e3, \
        (scraper.rows_written - rows0) // scrapes


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scrapes", type=int, default=50)
    args = ap.parse_args()
    bodies = {**fixture_bodies(), **mock_bodies()}
    with tempfile.TemporaryDirectory() as tmp:
        names = {}
        for i, (name, body) in enumerate(bodies.items()):
            names[name] = f"b{i}.prom"
            with open(os.path.join(tmp, names[name]), "wb") as f:
                f.write(body)
        port = 18000 + os.getpid() % 1000
        server = subprocess.Popen([sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1",
                                   "--directory", tmp], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            for _ in range(100):
                try:
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/{names[next(iter(names))]}", timeout=1)
                    break
                except OSError:
                    time.sleep(0.05)
            print(f"{'body':28s} {'bytes':>8s} {'rows':>6s} {'wall ms':>8s} {'CPU ms':>7s} {'loop gap ms':>11s}")
            for name, body in bodies.items():
                wall, cpu, gap, rows = measure(f"http://127.0.0.1:{port}/{names[name]}", args.scrapes,
                                               os.path.join(tmp, "out_server_metrics.csv"))
                print(f"{name:28s} {len(body):8d} {rows:6d} {wall:8.1f} {cpu:7.1f} {gap:11.1f}")
        finally:
            server.terminate()
            server.wait(5)


if __name__ == "__main__":
    main()
