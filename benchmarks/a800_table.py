"""The qwen2.5-3b-a800 mock profile over real HTTP, against the measured vLLM table.

Runs `llmload mock --profile qwen2.5-3b-a800` on CPU 0 and, from CPU 1, N closed-loop users
(8 different 512-word prompts, 128 output tokens with ignore_eos, 200 ms between a user's
requests, as in tests/unit/test_mock_engine.py's virtual-clock version) for each concurrency of the
table; prints measured vs table and the deviation (the target is within 15 %).

    python benchmarks/a800_table.py [--requests-per-user 6]
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import os  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402

import gevent  # noqa: E402

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
sys.path.insert(0, ROOT)

from llmload.metrics.record import RequestMeta  # noqa: E402
from llmload.mock.launch import port_of, start_mock_process, stop_mock_process  # noqa: E402
from llmload.transport import FastTransport  # noqa: E402
from llmload.wire.protocol import chat_body, encode_body  # noqa: E402

TABLE = {1: (46.8, 45.0, 20.7), 2: (84.2, 45.0, 21.5), 4: (164.4, 54.3, 22.0), 8: (315.9, 84.7, 22.7),
         16: (588.5, 120.6, 24.3)}
PROMPTS = [" ".join(f"p{i}w{j}" for j in range(512)) for i in range(8)]
GAP_S = 0.2


def run(port: int, conc: int, per_user: int) -> tuple[float, float, float]:
    records = []

    def user(u: int) -> None:
        t = FastTransport(f"http://127.0.0.1:{port}", "/v1/chat/completions", timeout=60)
        t.connect()
        for k in range(per_user):
            body = encode_body(chat_body("m", [{"role": "user", "content": PROMPTS[(u + k) % 8]}], 128,
                                         extra={"ignore_eos": True}))
            rec = t.stream(body, RequestMeta(f"{conc}-{u}-{k}", 0.0, "a800"))
            if k > 0:  # the first request of each user is warm-up
                records.append(rec)
            gevent.sleep(GAP_S)
        t.close()

    gevent.joinall([gevent.spawn(user, u) for u in range(conc)], timeout=600)
    ok = [r for r in records if r.ok]
    span_start = min(r.meta.start_time + r.ttft_ms / 1000 for r in ok)
    span_end = max(r.meta.start_time + r.e2e_ms / 1000 for r in ok)
    tokens = sum(r.completion_tokens for r in ok)
    return (tokens / (span_end - span_start), statistics.median(r.ttft_ms for r in ok),
            statistics.median(r.tpot_ms for r in ok))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests-per-user", type=int, default=6)
    args = ap.parse_args()
    if (os.cpu_count() or 1) > 1:
        os.sched_setaffinity(0, {1})
    proc, url = start_mock_process(["--profile", "qwen2.5-3b-a800"], cpu=0, cwd=ROOT)
    port = port_of(url)
    worst = 0.0
    try:
        print(f"{'conc':>5}{'tok/s':>10}{'table':>8}{'TTFT p50':>10}{'table':>8}{'TPOT p50':>10}{'table':>8}"
              f"{'worst dev':>11}")
        for conc, (tps, ttft, tpot) in TABLE.items():
            m_tps, m_ttft, m_tpot = run(port, conc, args.requests_per_user)
            dev = max(abs(m_tps / tps - 1), abs(m_ttft / ttft - 1), abs(m_tpot / tpot - 1))
            worst = max(worst, dev)
            print(f"{conc:>5}{m_tps:>10.1f}{tps:>8.1f}{m_ttft:>10.1f}{ttft:>8.1f}{m_tpot:>10.2f}{tpot:>8.1f}"
                  f"{dev:>10.1%}", flush=True)
    finally:
        stop_mock_process(proc)
    print(f"worst deviation {worst:.1%} (target ≤ 15 %)")


if __name__ == "__main__":
    main()
