"""CPU µs per request outside the stream, piece by piece, in a real Locust environment.

What a Locust process does for every request besides reading its tokens: draw the next request
from the workload and encode its body, build its metadata, derive the record from the stream's
timestamps, account it (`LLMLoadPlugin.record`: Locust's request event and rows, the LLM stats
with every ITL gap, the CSV row), then, once a second, write the rows to PREFIX_requests.csv and
feed the live window; on a worker, ship rows and stats to the master (msgpack, as Locust sends them).

    python benchmarks/request_overhead.py [--requests 5000] [--input-tokens 512] [--output-tokens 128]
"""

from __future__ import annotations

from gevent import monkey

monkey.patch_all()

import argparse  # noqa: E402
import os  # noqa: E402
import random  # noqa: E402
import sys  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from time import perf_counter  # noqa: E402

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import msgpack  # noqa: E402
from locust import events  # noqa: E402
from locust.env import Environment  # noqa: E402

from llmload import LLMUser  # noqa: E402
from llmload.metrics.record import RequestMeta, StreamAccumulator  # noqa: E402
from llmload.plugin.output.run_files import RequestsCsv  # noqa: E402
from llmload.plugin.wiring import get_plugin  # noqa: E402
from llmload.wire.chunks import PLAIN, Chunk  # noqa: E402
from llmload.wire.protocol import encode_body  # noqa: E402
from llmload.workload.synthetic import LengthRange, SyntheticChat  # noqa: E402


class BenchUser(LLMUser):
    pass


def timed(fn, n: int) -> float:
    """CPU µs per call of fn(i) over n calls."""
    t = time.process_time()
    for i in range(n):
        fn(i)
    return (time.process_time() - t) / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=5000)
    ap.add_argument("--input-tokens", type=int, default=512)
    ap.add_argument("--output-tokens", type=int, default=128)
    args = ap.parse_args()
    n, out_tokens = args.requests, args.output_tokens
    env = Environment(user_classes=[BenchUser], events=events)
    env.create_local_runner()
    plugin = get_plugin(env)
    kwargs = {}
    if "text" in SyntheticChat.__init__.__code__.co_varnames:  # the shared corpus, when this version has it
        kwargs["text"] = plugin.shared.text_source(0, None)
    workload = SyntheticChat("bench", "mock", LengthRange(args.input_tokens, args.input_tokens),
                             LengthRange(out_tokens, out_tokens), seed=1, ignore_eos=True, **kwargs)
    usage = Chunk(output=False, usage={"prompt_tokens": args.input_tokens, "completion_tokens": out_tokens,
                                       "total_tokens": args.input_tokens + out_tokens})
    done = Chunk(done=True)
    rng = random.Random(2)
    accs = []
    for _ in range(min(n, 500)):  # realistic timestamps: 200 ms to the first token, ~20 ms apart
        t0 = perf_counter()
        acc = StreamAccumulator(t0)
        t = t0 + 0.2
        for _ in range(out_tokens):
            acc.add(PLAIN, t)
            t += 0.02 + rng.uniform(-0.002, 0.002)
        acc.add(usage, t)
        acc.add(done, t)
        accs.append(acc)
    metas = [RequestMeta(request_id=plugin.next_request_id(), start_time=time.time(), scenario="bench",
                         max_tokens=out_tokens, users=1024) for _ in range(n)]
    records = []

    results = {}
    results["workload: next request"] = timed(lambda i: workload.next_request(), n)
    reqs = [workload.next_request() for _ in range(200)]
    results["encode body"] = timed(lambda i: encode_body(reqs[i % 200].body()), n)
    results["request metadata"] = timed(lambda i: RequestMeta(
        request_id=plugin.next_request_id(), start_time=time.time(), scenario="bench", max_tokens=out_tokens,
        users=1024, worker=0, session_id="", turn=None, scheduled_time=None, requested_input_tokens=512,
        arrival_rate=None), n)
    results["record from timestamps (finish)"] = timed(
        lambda i: records.append(accs[i % len(accs)].finish(metas[i], "complete", 0.0)), n)
    results["plugin.record (Locust event, stats, row)"] = timed(lambda i: plugin.record(records[i]), n)

    with tempfile.TemporaryDirectory() as d:
        plugin.files.requests = RequestsCsv(os.path.join(d, "x_requests.csv"))
        rows = list(plugin.pending_rows)
        plugin.pending_rows = []
        t = time.process_time()
        for k in range(0, len(rows), 400):  # a second's worth at 400 requests/s
            plugin.write_rows(rows[k:k + 400])
        results["CSV row + live window (per row)"] = (time.process_time() - t) / len(rows) * 1e6
        plugin.files.close()
    for rec in records:
        plugin.stats.add(rec, track_delta=True)
    t = time.process_time()
    payload = {"rows": [r.row() for r in records], "stats": plugin.stats.take_delta()}
    msgpack.packb(payload, use_bin_type=True)
    results["worker shipping: rows + stats, msgpack (per row)"] = (time.process_time() - t) / n * 1e6

    total = 0.0
    print(f"{'per request (input ' + str(args.input_tokens) + ', output ' + str(out_tokens) + ' tokens)':<52}"
          f"{'CPU µs':>10}")
    for name, us in results.items():
        print(f"{name:<52}{us:>10.1f}")
        total += us
    print(f"{'total':<52}{total:>10.1f}")


if __name__ == "__main__":
    main()
