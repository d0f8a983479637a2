"""The `llmload` command: thin argument parsing over the modules that do the work."""

from __future__ import annotations

import argparse
import sys

from llmload import __version__
from llmload.argtypes import POSITIVE_SECONDS


def _mock(args: argparse.Namespace) -> int:
    import signal

    import gevent

    from llmload.mock.options import config_from_args, list_profiles
    from llmload.mock.server import MockServer

    if args.list_profiles:
        print(list_profiles())
        return 0
    stopping = gevent.event.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):  # before "listening": a caller may signal right away
        gevent.signal_handler(sig, stopping.set)
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
    stopping.wait()
    server.stop()
    print("llmload mock: stopped", flush=True)
    return 0


def _report_options(args: argparse.Namespace):
    from llmload.metrics.slo import parse_error_budget
    from llmload.report import ReportOptions, parse_slo

    slos = [parse_slo(s) for s in args.slo]
    if args.scenario:
        slos += scenario_slos(args.scenario)
    # `compare` takes prices and GPU counts per run (comma-separated text) and applies them per run;
    # only `report`'s single numbers belong in the shared options.
    price, gpus = getattr(args, "gpu_hourly_usd", None), getattr(args, "gpus_per_replica", 1)
    return ReportOptions(
        slos=slos, warmup_s=args.warmup_s, gpu_hourly_usd=price if not isinstance(price, str) else None,
        gpus_per_replica=gpus if isinstance(gpus, int) else 1, target_rps=getattr(args, "target_rps", None),
        daily_requests=getattr(args, "daily_requests", None), peak_factor=getattr(args, "peak_factor", 1.0),
        headroom=getattr(args, "headroom", 0.3), output_cost_weight=args.output_cost_weight,
        error_budget=parse_error_budget(args.error_budget), sample_floor=args.sample_floor,
        run_id=getattr(args, "run_id", None), usd_per_kwh=args.usd_per_kwh, allow_throttled=args.allow_throttled)


def _report(args: argparse.Namespace) -> int:
    from llmload.report import ReportError, build_report, write_report
    from llmload.report.render import default_out, summary_text

    try:
        prefix = args.prefix[0] if len(args.prefix) == 1 else args.prefix
        report = build_report(prefix, _report_options(args))
        out, names = (args.out, "") if args.out else default_out(report.source.split(", ")[0])
        paths = write_report(report, out, names)
    except (ReportError, ValueError, OSError) as e:  # ScenarioError is a ValueError
        print(f"llmload report: {e}", file=sys.stderr)
        return 2
    print(summary_text(report))
    print("wrote " + ", ".join(paths))
    from llmload.report.compare.archive import Archive, ArchiveError, created_note, turned_off

    if not args.no_archive and (args.archive or not turned_off()):
        try:
            with Archive.open(args.archive) as a:  # None: $LLMLOAD_ARCHIVE, else ~/.local/share/llmload
                if a.created:
                    print(created_note("report", a.path))
                print(f"archived as run {a.add(report)} in {a.path}")
        except ArchiveError as e:
            if args.archive:  # the archive asked for: its failure is the command's
                print(f"llmload report: {e}", file=sys.stderr)
                return 2
            print(f"llmload report: warning: not archived: {e}", file=sys.stderr)  # the report itself is written
    return 0


def _compare(args: argparse.Namespace) -> int:
    import os

    from llmload.report import ReportError
    from llmload.report.compare.archive import ArchiveError
    from llmload.report.compare.compare_noise import noise_rows, parse_gates, regressions
    from llmload.report.compare.compare_render import comparison_text, write_comparison
    from llmload.report.compare.compare_runs import compare_runs

    try:
        gates = parse_gates(args.fail_on_regression)
        if args.baseline:
            args.prefixes, args.label = _with_baseline(args)
        prices = [float(x) for x in args.gpu_hourly_usd.split(",")] if args.gpu_hourly_usd else None
        gpus = [int(x) for x in args.gpus_per_replica.split(",")] if args.gpus_per_replica else None
        cmp = compare_runs(args.prefixes, args.label, _report_options(args), at=args.at, gpu_hourly_usd=prices,
                           gpus_per_replica=gpus)
        cmp.noise = noise_rows(cmp, repeats_by_label=bool(args.label))
        out = args.out or os.path.dirname(cmp.runs[0].report.source) or "."
        paths = write_comparison(cmp, out, args.name)
    except (ReportError, ArchiveError, ValueError, OSError) as e:
        print(f"llmload compare: {e}", file=sys.stderr)
        return 2
    print(comparison_text(cmp))
    print("wrote " + ", ".join(paths))
    failing = regressions(cmp.noise, gates)
    for line in failing:
        print(f"llmload compare: regression: {line}", file=sys.stderr)
    return 3 if failing else 0


def _with_baseline(args: argparse.Namespace) -> tuple[list[str], list[str] | None]:
    """``--baseline last|RUN_ID``: the archived run's prefix goes first (the runs given are not the baseline)."""
    import json

    from llmload.files import prefix_of
    from llmload.report.compare.archive import Archive
    from llmload.report.run_identity import manifest_path

    mine = set()
    for p in args.prefixes:
        try:
            with open(manifest_path(p), encoding="utf-8") as f:
                mine.add(json.load(f).get("run_id"))
        except (OSError, ValueError):
            pass
    with Archive.open(args.archive) as a:
        base = a.get(args.baseline, mine)
    import os

    given = args.label or [os.path.join(os.path.basename(os.path.dirname(os.path.abspath(p))),
                                        os.path.basename(p)) for p in args.prefixes]
    return [prefix_of(base["prefix"]), *args.prefixes], [f"baseline {base['run_id'] or base['id']}", *given]


def _history(args: argparse.Namespace) -> int:
    from llmload.report.compare.archive import Archive, ArchiveError, history_text

    try:
        with Archive.open(args.archive) as a:
            print(history_text(a.runs(model=args.model, host=args.host, since=args.since)))
    except ArchiveError as e:
        print(f"llmload history: {e}", file=sys.stderr)
        return 2
    return 0


def scenario_slos(path: str) -> list:
    """Each workload's ``slo:`` in a scenario file, scoped to that workload."""
    from llmload.workload.file.scenario import load_scenario

    return [slo for w in load_scenario(path).workloads for slo in w.slos]


def _demo(args: argparse.Namespace) -> int:
    from llmload.demo import run_demo

    try:
        return run_demo(args.out, profile=args.profile, steps=args.steps, step_seconds=args.step_seconds)
    except (RuntimeError, OSError) as e:
        print(str(e), file=sys.stderr)
        return 2


def _sweep(args: argparse.Namespace) -> int:
    from llmload.report.compare.archive import default_path
    from llmload.sweep.command import SweepSettings, run_sweep

    if not args.out and not args.dry_run:
        print("llmload sweep: --out DIR is required (where the cells and sweep.* go)", file=sys.stderr)
        return 2
    archive = None if args.no_archive else (args.archive or default_path())
    return run_sweep(SweepSettings(plan_path=args.plan, out=args.out or "", resume=args.resume,
                                   dry_run=args.dry_run, archive=archive))


def _step_list(text: str) -> str:
    from llmload.shapes.schedules import parse_steps

    try:
        parse_steps(text, "")
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).split(": ", 1)[-1]) from None
    return text


def _judging_arguments(p: argparse.ArgumentParser) -> None:
    """How steps are judged: the same for a report and a comparison."""
    p.add_argument("--slo", action="append", default=[], metavar="[SCENARIO:]METRIC=VALUE",
                   help="e.g. ttft_p95_ms=2000, tpot_p95_ms=50, error_rate=0.05, rag:ttft_p95_ms=3000")
    p.add_argument("--scenario", metavar="FILE", help="also use the slo: of each workload in this scenario file "
                   "(scoped to that workload)")
    p.add_argument("--error-budget", default="", metavar="FRACTION|off", help="failed ÷ finished requests a "
                   "step may have (default 0.01); off: failures count against no SLO; --slo error_rate=X wins")
    p.add_argument("--warmup-s", type=float, help="seconds after each load change not measured (default 5, or "
                   "the shape's own from PREFIX_run.json: the search's, the SLO stop's)")
    p.add_argument("--sample-floor", type=int, default=30, help="ok requests a step needs for a verdict "
                   "(default 30); a thinner step is never capacity")
    p.add_argument("--output-cost-weight", type=float, help="price an output token as this many input tokens "
                   "to split cost between input and output")
    p.add_argument("--usd-per-kwh", type=float, help="price of a kWh: the GPUs' energy cost beside the GPU-hour "
                   "cost (runs with --gpu-metrics)")
    p.add_argument("--allow-throttled", action="store_true", help="let a step whose GPUs throttled or logged an "
                   "XID error be capacity (default: never)")


def _archive_arguments(p: argparse.ArgumentParser, what: str, skipped: str | None = None) -> None:
    """``--archive PATH`` (and ``--no-archive`` for a command that adds to the archive)."""
    p.add_argument("--archive", metavar="PATH", help=f"{what} (default $LLMLOAD_ARCHIVE or "
                   "~/.local/share/llmload/runs.sqlite)")
    if skipped is not None:
        p.add_argument("--no-archive", action="store_true", help=f"do not archive {skipped} "
                       "(LLMLOAD_ARCHIVE=off: never)")


def build_parser() -> argparse.ArgumentParser:
    from llmload.mock.options import add_mock_arguments

    parser = argparse.ArgumentParser(prog="llmload", description="LLM load testing on Locust: mock server, "
                                     "reports, comparisons and the demo. Load itself runs with `locust`.")
    parser.add_argument("--version", action="version", version=f"llmload {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    mock = sub.add_parser("mock", help="serve a simulated OpenAI-compatible LLM engine")
    add_mock_arguments(mock)
    mock.set_defaults(func=_mock)

    rep = sub.add_parser("report", help="turn a run's CSVs into a capacity plan (md, html, json)")
    rep.add_argument("prefix", nargs="+", help="the --csv PREFIX of the run (reads PREFIX_requests.csv), or "
                     "several requests CSVs of one run (e.g. each worker's PREFIX_requests.workerN.csv)")
    rep.add_argument("--out", help="output directory, files report.* (default: next to the CSVs, files "
                     "PREFIX_report.*)")
    rep.add_argument("--run-id", help="the run to report on when the CSV holds rows of several")
    _judging_arguments(rep)
    rep.add_argument("--gpu-hourly-usd", type=float, help="price of one GPU-hour")
    rep.add_argument("--gpus-per-replica", type=int, default=1, help="GPUs one server replica uses (default 1)")
    rep.add_argument("--target-rps", type=float, help="peak requests/s the fleet must serve")
    rep.add_argument("--daily-requests", type=float, help="requests per day (with --peak-factor) instead of "
                     "--target-rps")
    rep.add_argument("--peak-factor", type=float, default=1.0, help="peak rate ÷ average rate (default 1)")
    rep.add_argument("--headroom", type=float, default=0.3, help="share of capacity kept free (default 0.3)")
    _archive_arguments(rep, "add the run to this SQLite archive", "the run")
    rep.set_defaults(func=_report)

    cmp = sub.add_parser("compare", help="several runs side by side: capacity, cost, latency at matched load "
                         "(md, html, json)")
    cmp.add_argument("prefixes", nargs="+", metavar="RUN_PREFIX", help="the --csv PREFIX of each run")
    cmp.add_argument("--label", action="append", help="a name per run, in order (default: the prefix's name)")
    cmp.add_argument("--out", help="output directory (default: next to the first run's CSVs)")
    cmp.add_argument("--name", default="compare", help="file name before .md/.html/.json (default compare)")
    cmp.add_argument("--at", type=float, help="the load level (users or req/s) to compare latencies at "
                     "(default: the highest level every run measured)")
    _judging_arguments(cmp)
    cmp.add_argument("--gpu-hourly-usd", help="price of one GPU-hour: one value, or one per run (comma-separated)")
    cmp.add_argument("--gpus-per-replica", help="GPUs per replica: one value, or one per run (comma-separated)")
    cmp.add_argument("--fail-on-regression", action="append", default=[], metavar="METRIC=PCT",
                     help="exit 3 when a run is worse than the first by more than PCT %% and the difference is real "
                          "(not noise), e.g. tpot_p95_ms=5 (repeatable)")
    cmp.add_argument("--baseline", metavar="last|RUN_ID", help="compare against this archived run (first)")
    _archive_arguments(cmp, "the archive --baseline reads")
    cmp.set_defaults(func=_compare)

    hist = sub.add_parser("history", help="list the archived runs")
    hist.add_argument("--model", help="runs whose model contains this")
    hist.add_argument("--host", help="runs whose host contains this")
    hist.add_argument("--since", metavar="DATE", help="runs added on or after this date (YYYY-MM-DD)")
    _archive_arguments(hist, "the archive")
    hist.set_defaults(func=_history)

    from llmload.demo import DEMO_PROFILE, DEMO_STEP_SECONDS, DEMO_STEPS

    demo = sub.add_parser("demo", help="mock server + headless step load + summary, in about a minute")
    demo.add_argument("--out", default="reports/demo", help="where the CSVs and the report go (default reports/demo)")
    demo.add_argument("--profile", default=DEMO_PROFILE, help=f"mock profile (default {DEMO_PROFILE})")
    demo.add_argument("--steps", type=_step_list, default=DEMO_STEPS,
                      help=f"user count per step (default {DEMO_STEPS})")
    demo.add_argument("--step-seconds", type=POSITIVE_SECONDS, default=DEMO_STEP_SECONDS,
                      help=f"seconds per step (default {DEMO_STEP_SECONDS})")
    demo.set_defaults(func=_demo)

    sweep = sub.add_parser("sweep", help="run a plan of deployments × params × workloads: the cheapest deployment "
                           "meeting the SLOs, its Pareto frontier (md, html, json)")
    sweep.add_argument("plan", help="the plan file (YAML; see docs/sweep.md)")
    sweep.add_argument("--out", help="where the cells (DIR/cells/<cell-id>/) and sweep.* go (required unless "
                       "--dry-run)")
    sweep.add_argument("--resume", action="store_true", help="keep the finished cells in --out, run the rest")
    sweep.add_argument("--dry-run", action="store_true", help="print the cells and the estimated time, run nothing")
    _archive_arguments(sweep, "add each finished cell to this SQLite archive", "the cells")
    sweep.set_defaults(func=_sweep)

    from llmload.calibrate.arguments import add_calibrate_arguments, calibrate_from_args

    cal = sub.add_parser("calibrate", help="how much load one llmload process drives on this machine within "
                         "your tolerances")
    add_calibrate_arguments(cal)
    cal.set_defaults(func=calibrate_from_args)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
