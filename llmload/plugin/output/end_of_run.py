"""The end-of-run text a headless run prints: the LLM table, then what limited the run and why it
stopped. Pure: rows and notes in, text out.

Usage::

    print(format_summary(stats.rows(), expected_hit_ratio={"rag": 0.9}))
    print(run_notes(history.client, stop_reason="", stalls=clients.stalls, timing=clients.timing))
    print(error_note(stats.rows(), history.error_intervals, 2.0))   # first, when errors dominate
"""

from __future__ import annotations

from typing import Any

from llmload import files
from llmload.health.run_verdict import ClientRun, client_details, client_line, new_timing, verbose_lines
from llmload.health.stalls import StallStats
from llmload.health.verdict import errors_dominate
from llmload.metrics import catalog
from llmload.metrics.histogram import SIGNIFICANT, figure
from llmload.metrics.record import CANCELLED, STATUSES
from llmload.metrics.scenario_stats import LATE_MS
from llmload.metrics.stats import AGGREGATED


def _total(rows: list[dict[str, Any]]) -> dict[str, Any] | None:
    return next((r for r in rows if r["scenario"] == AGGREGATED), rows[0] if len(rows) == 1 else None)


def error_note(rows: list[dict[str, Any]], error_intervals: list[str], interval_s: float) -> str:
    """Printed first when most requests failed: the numbers below then describe failures, not capacity."""
    total = _total(rows)
    if total is None:
        return ""
    finished = total["ok"] + total["failures"]
    parts = []
    if errors_dominate(finished, total["failures"]):
        by_status = ", ".join(f"{st} {total[st]}" for st in STATUSES[1:-1] if total.get(st))
        parts.append(f"SERVER ERRORS: {total['failures']} of {finished} finished requests failed ({by_status}): "
                     "the server, or the way to it, failed the run; the client is not the limit")
    if error_intervals:
        parts.append(f"errors dominated {len(error_intervals)} of the {interval_s:g}-second intervals "
                     f"(last: {error_intervals[-1]})")
    return "\n".join(parts)


def backoff_note(rows: list[dict[str, Any]]) -> str:
    total = _total(rows)
    if total is None or not total.get("backoff_waits"):
        return ""
    return (f"backoff: users waited {total['backoff_s']:.1f} s in all, after {total['backoff_waits']} requests "
            "answered 429/503 or not at all (Retry-After, else exponential backoff; column backoff_ms)")


def format_summary(rows: list[dict[str, Any]], expected_hit_ratio: dict[str, float] | None = None) -> str:
    """The end-of-run table printed by headless runs (``expected_hit_ratio``: per scenario, what
    its prefix groups make possible)."""
    def f(v: Any, nd: int = 1) -> str:
        return "-" if v is None else (f"{v:.{nd}f}" if isinstance(v, float) else str(v))

    # (heading, llm_stats column, width): a metric's first statistic carries its label. Percentiles
    # with the digits the histograms support (histogram.figure): 28.665 and 28.83 share a 2 % bucket
    # and read alike, so 28.79 28.79 28.79 would claim digits that are not there.
    latency = [(metric.title(st) if i == 0 else st, metric.stats_column(st), len(metric.title(st)) + 2 if i == 0 else 9)
               for metric in catalog.METRICS for i, st in enumerate(metric.summary)]
    head = (f"{'scenario':<16}{'reqs':>7}{'ok':>7}{'fail':>6}{'req/s':>8}{'out tok/s':>11}"
            + "".join(f"{title:>{w}}" for title, _, w in latency))
    lines = ["LLM summary of the whole run, warm-up included (ms; latency over ok requests; ITL over all chunks; "
             f"percentiles to {SIGNIFICANT} significant digits, each within 1 %: closer values read alike). "
             "`llmload report` measures each load step after its warm-up, so its figures differ.", head]
    for r in rows:
        lines.append(
            f"{r['scenario'][:15]:<16}{r['requests']:>7}{r['ok']:>7}{r['failures']:>6}{f(r['rps'], 2):>8}"
            f"{f(r['output_tps']):>11}" + "".join(f"{figure(r[col]):>{w}}" for _, col, w in latency)
        )
    errors = {}
    for r in rows:
        if r["scenario"] == AGGREGATED and len(rows) > 1:
            continue
        for st in STATUSES[1:]:
            if r.get(st):
                errors[st] = errors.get(st, 0) + r[st]
    if errors:
        lines.append("by status: " + ", ".join(f"{k} {v}" for k, v in errors.items()))
        if errors.get(CANCELLED):
            lines.append(f"{errors[CANCELLED]} cancelled: in flight when the test ended and cut off (not failures of "
                         "the server); --stop-timeout S lets requests in flight finish, up to S seconds")
    totals = rows[-1] if rows else {}
    if totals.get("compressed_responses"):
        lines.append(f"{totals['compressed_responses']} response(s) came compressed despite Accept-Encoding: "
                     "identity (a gateway?); they were decoded")
    if totals.get("coalesced_reads"):
        lines.append(f"{totals['coalesced_reads']} read(s) carried several tokens at once (the client fell behind "
                     "or the server sent them together): their gaps are left out of ITL and ITL max")
    for r in rows:
        if r["scenario"] == AGGREGATED:
            continue
        parts = []
        if r.get("requested_input_tokens_mean") is not None:
            image = r.get("requested_image_tokens_mean") or 0.0
            asked = (f"{r['requested_input_tokens_mean']:.1f} text + {image:.1f} image" if image
                     else f"{r['requested_input_tokens_mean']:.1f}")
            parts.append(f"input tokens requested {asked} vs server-reported {r['prompt_tokens_mean']:.1f} (mean)")
        if r.get("cached_tokens"):
            exp = (expected_hit_ratio or {}).get(r["scenario"])
            meant = getattr(expected_hit_ratio, "intended", {}).get(r["scenario"])
            if meant is not None:
                off = abs(r["cache_hit_ratio"] - meant)
                parts.append(f"prefix-cache hit ratio {r['cache_hit_ratio']:.3f} (cached ÷ prompt tokens), {meant:.3f} "
                             "intended (prefix_hit_rate)" + (f": WARNING {off * 100:.0f} points apart (a cache too "
                                                              "small or evicting, or a router splitting prefixes)"
                                                              if off > catalog.INTENDED_HIT_TOLERANCE else ""))
            elif catalog.unexplained_hits(r["cache_hit_ratio"], possible := catalog.possible_hit_share(
                    exp, r.get("resent_input_share"))):
                shared = ("though this workload shares no prefix and resends nothing" if not possible else
                          f"more than the {possible:.0%} its shared prefixes and what it resends by design (history, "
                          "parent context, system prompt) make possible")
                parts.append(f"WARNING: the server answered {r['cache_hit_ratio']:.0%} of the prompt tokens from its "
                             f"prefix cache, {shared}: an earlier run with the same prompts (the same --seed)? Its "
                             "latencies are the cache's, not the workload's")
            else:
                parts.append(f"prefix-cache hit ratio {r['cache_hit_ratio']:.3f} (cached ÷ prompt tokens)"
                             + (f", at most {possible:.3f} expected from the scenario" if possible else ""))
        if parts:
            lines.append(f"{r['scenario']}: " + "; ".join(parts))
        if r.get("tasks"):
            lines.append(f"{r['scenario']}: " + task_line(r))
        if r.get("scheduled_requests"):
            lines.append(schedule_line(r))
    return "\n".join(lines)


def task_line(r: dict[str, Any]) -> str:
    """Agent tasks of one scenario row: outcomes, task time, calls and tokens per task, the SLO share."""
    def s(v: Any) -> str:
        return "-" if v is None else f"{v:.2f} s"

    text = (f"{r['tasks']} tasks ({r['tasks_answered']} answered, {r['tasks_step_limit']} at the step limit, "
            f"{r['tasks_failed']} failed); task time p50 {s(r['median_task_s'])}, p95 {s(r['p95_task_s'])}, "
            f"p99 {s(r['p99_task_s'])}; per task {r['calls_per_task']:.2f} calls, "
            f"{r['prompt_tokens_per_task']:,.0f} prompt + {r['completion_tokens_per_task']:,.0f} completion tokens")
    if r.get("tasks_within_slo") is not None:
        text += f"; {r['tasks_within_slo']:.1%} of tasks finished within the task SLO"
    return text


def schedule_line(r: dict[str, Any]) -> str:
    """Whether the client kept to the schedule (trace times, open-loop arrivals) of one scenario."""
    n, late = r["scheduled_requests"], r["late_requests"]
    lag = f"lag p50 {r['median_schedule_lag_ms']:.2f} ms, p99 {r['p99_schedule_lag_ms']:.2f} ms, " \
          f"max {r['max_schedule_lag_ms']:.1f} ms"
    if late:
        return (f"BEHIND SCHEDULE: {r['scenario']}: {late} of {n} requests were sent more than {LATE_MS:g} ms after "
                f"their scheduled time ({lag}); the client fell behind the trace or arrival process: give it more "
                "users (-u) or worker processes (--processes)")
    return f"{r['scenario']}: every one of {n} scheduled requests sent within {LATE_MS:g} ms of its time ({lag})"


def run_notes(client: ClientRun, stop_reason: str, stalls: StallStats | None = None,
              timing: dict[str, int] | None = None, errors_first: bool = False, details_in: str = "",
              verbose: bool = False) -> str:
    """The client's one verdict line (:func:`llmload.health.run_verdict.client_line`, the
    dashboard's badge says the same), where its details are (``details_in``: PREFIX_run.json;
    ``verbose``: printed below), and why a shape stopped the run (``errors_first``: errors
    dominated, so the client is not judged)."""
    line = client_line(client, stalls, timing, errors_first)
    if stalls is not None and not verbose and (stalls.count or client.limited):
        line += f" (details: --verbose, {details_in})" if details_in else " (details: --verbose)"
    notes = [line]
    if verbose and stalls is not None:
        notes += verbose_lines(client_details(client, stalls, timing or new_timing(), errors_first))
    if stop_reason:
        notes.append(stop_reason)
    return "\n".join(notes)


def client_report(rows: list[dict[str, Any]], history: Any, clients: Any) -> dict[str, Any]:
    """PREFIX_run.json's ``client``: the verdict line and everything behind it."""
    first = bool(error_note(rows, history.error_intervals, history.client.interval_s))
    return client_details(history.client, clients.stalls, clients.timing, first)


def lost_note(lost: list[tuple[Any, str, int]], prefix: str | None) -> str:
    """Workers that vanished (SIGKILL, a host gone) with requests the master has no row for."""
    lines = []
    for index, client_id, n in lost:
        where = (f"{files.worker_path(prefix, index)} beside these files on this host, else under that path in its "
                 "working directory (the line of each worker below says where it kept its copy)"
                 if prefix else "its own --csv file, if any")
        lines.append(f"LOST WORKER {index} ({client_id}): no final data; {n} of its requests have no row here "
                     f"(in flight, or finished but not yet reported, when it vanished; the server saw them; "
                     f"{where} has those it finished before the last report)")
    return "\n".join(lines)


def end_of_run_text(rows: list[dict[str, Any]], hit_ratios: dict[str, float], history: Any, stop_reason: str,
                    interval_s: float, lost: list[tuple[Any, str, int]], prefix: str | None,
                    output_error: str = "", clients: Any = None, refused: str = "", seeds: str = "",
                    warmup: str = "", verbose: bool = False) -> str:
    """What a headless run prints at the end: what went wrong first (errors that dominated, a
    file that could not be written, lost workers), then the table and the notes (``clients``: the
    run's :class:`~llmload.health.fleet.ClientView`; ``seeds``: the seeds' line, plugin.options.seeds.seed_line;
    ``warmup``: how many warm-up requests the verdicts leave out)."""
    first = error_note(rows, history.error_intervals, interval_s)
    parts = [p for p in (first, f"OUTPUT FAILED: {output_error}" if output_error else "", lost_note(lost, prefix),
                         refused,
                         format_summary(rows, hit_ratios), warmup, backoff_note(rows),
                         run_notes(history.client, stop_reason, getattr(clients, "stalls", None),
                                   getattr(clients, "timing", None), errors_first=bool(first),
                                   details_in=files.path(prefix, files.MANIFEST) if prefix else "", verbose=verbose),
                         seeds)
             if p]
    return "\n".join(parts)
