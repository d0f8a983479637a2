"""The `llmload` command: thin argument parsing over the modules that do the work."""

from __future__ import annotations

import argparse
import sys


def _mock(args: argparse.Namespace) -> int:
    import signal

    import gevent

    from llmload.mock.options import config_from_args, list_profiles
    from llmload.mock.server import MockServer

    if args.list_profiles:
        print(list_profiles())
        return 0
    try:
        config = config_from_args(args)
        server = MockServer(config, host=args.host, port=args.port)
        host, port = server.start()
    except (ValueError, OSError) as e:
        print(f"llmload mock: {e}", file=sys.stderr)
        return 2
    engine = "fixed" if config.engine_params is None else "batching"
    print(f"llmload mock: profile {config.profile.name} ({engine} engine), model {config.model}, "
          f"listening on http://{host}:{port}", flush=True)
    stopping = gevent.event.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        gevent.signal_handler(sig, stopping.set)
    stopping.wait()
    server.stop()
    print("llmload mock: stopped", flush=True)
    return 0


def _demo(args: argparse.Namespace) -> int:
    from llmload.demo import run_demo

    try:
        return run_demo(args.out, profile=args.profile, steps=args.steps, step_seconds=args.step_seconds)
    except (RuntimeError, OSError) as e:
        print(str(e), file=sys.stderr)
        return 2


def build_parser() -> argparse.ArgumentParser:
    from llmload.mock.options import add_mock_arguments

    parser = argparse.ArgumentParser(prog="llmload", description="LLM load testing on Locust: mock server, "
                                     "reports and the demo. Load itself runs with `locust`.")
    sub = parser.add_subparsers(dest="command", required=True)
    mock = sub.add_parser("mock", help="serve a simulated OpenAI-compatible LLM engine")
    add_mock_arguments(mock)
    mock.set_defaults(func=_mock)

    from llmload.demo import DEMO_PROFILE, DEMO_STEP_SECONDS, DEMO_STEPS

    demo = sub.add_parser("demo", help="mock server + headless step load + summary, in about a minute")
    demo.add_argument("--out", default="reports/demo", help="where the CSVs and the report go (default reports/demo)")
    demo.add_argument("--profile", default=DEMO_PROFILE, help=f"mock profile (default {DEMO_PROFILE})")
    demo.add_argument("--steps", default=DEMO_STEPS, help=f"user count per step (default {DEMO_STEPS})")
    demo.add_argument("--step-seconds", type=float, default=DEMO_STEP_SECONDS,
                      help=f"seconds per step (default {DEMO_STEP_SECONDS})")
    demo.set_defaults(func=_demo)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
