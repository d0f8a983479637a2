"""``llmload calibrate``'s command line: its arguments and the run they ask for.

Usage (from :func:`llmload.cli.build_parser`)::

    add_calibrate_arguments(sub.add_parser("calibrate"))
    exit_code = calibrate_from_args(args)
"""

from __future__ import annotations

import argparse
import sys

from llmload.argtypes import POSITIVE, POSITIVE_INT, POSITIVE_SECONDS, number


def add_calibrate_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--processes", type=POSITIVE_INT, default=1, help="worker processes, as locust --processes "
                   "(default 1)")
    p.add_argument("--input-tokens", default="512", help="prompt length: N or LOW-HIGH (default 512)")
    p.add_argument("--output-tokens", type=POSITIVE_INT, default=128, help="reply length (default 128)")
    p.add_argument("--ttft-ms", type=POSITIVE, default=200.0, help="the mock's first-token delay "
                   "(default 200)")
    p.add_argument("--itl-ms", type=POSITIVE, default=20.0, help="the mock's time between tokens "
                   "(default 20)")
    p.add_argument("--ttft-error-ms", type=POSITIVE, default=1.0, help="a request's TTFT may be off by this much "
                   "(ms, default 1)")
    p.add_argument("--itl-max-error-ms", type=POSITIVE, default=2.0, help="a request's itl_max_ms may be off by "
                   "this much (ms, default 2)")
    share = number(above=0, at_most=1, noun="a share of requests")
    p.add_argument("--share", type=share, default=0.99, help="the share of requests that must be within both "
                   "(default 0.99)")
    p.add_argument("--max-stall-ms", type=POSITIVE, help="also fail a step on an event-loop stall that used more "
                   "CPU than this (ms; default: stalls are reported, and fail a step only through the tolerances)")
    p.add_argument("--repeats", type=POSITIVE_INT, default=3, help="runs per step; the step's figures are their "
                   "medians (default 3)")
    p.add_argument("--streams", help="stream counts per process that bracket the limit, e.g. 64,256,1024 "
                   "(default: doubling from 32); the limit is then bisected")
    p.add_argument("--max-streams", type=POSITIVE_INT, default=4096, help="stop climbing here (default 4096)")
    p.add_argument("--step-seconds", type=POSITIVE_SECONDS, default=10.0, help="steady state measured per repeat "
                   "(default 10)")
    p.add_argument("--target-tps", type=POSITIVE, help="output tokens/s to reach: how many worker "
                   "processes it needs")
    p.add_argument("--out", help="where the JSON goes (default ~/.cache/llmload/calibration.json, which later "
                   "runs on this host read); the curve's HTML page goes beside it (.html)")


def calibrate_from_args(args: argparse.Namespace) -> int:
    """``llmload calibrate``: the settings checked, the calibration run; the exit code."""
    from llmload.calibrate.command import CalibrateSettings, Tolerances, calibrate

    try:
        streams = tuple(int(x) for x in args.streams.split(",")) if args.streams else None
    except ValueError:
        print(f"llmload calibrate: --streams {args.streams!r}: expected whole numbers, e.g. 64,256,1024",
              file=sys.stderr)
        return 2
    try:
        tol = Tolerances(ttft_error_ms=args.ttft_error_ms, itl_max_error_ms=args.itl_max_error_ms, share=args.share,
                         max_stall_ms=args.max_stall_ms)
    except ValueError as e:
        print(f"llmload calibrate: {e}", file=sys.stderr)
        return 2
    s = CalibrateSettings(processes=args.processes, input_tokens=args.input_tokens, output_tokens=args.output_tokens,
                          ttft_ms=args.ttft_ms, itl_ms=args.itl_ms, step_seconds=args.step_seconds,
                          max_streams=args.max_streams, repeats=args.repeats, tolerances=tol,
                          target_tps=args.target_tps, out=args.out or "")
    if streams:
        s.streams = streams
    try:
        calibrate(s)
    except (RuntimeError, OSError, ValueError) as e:
        print(f"llmload calibrate: {e}", file=sys.stderr)
        return 2
    return 0
