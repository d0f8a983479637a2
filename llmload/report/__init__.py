"""From a run's CSVs to a capacity plan: steps, SLO capacity, cost, replicas. No Locust import.

Usage::

    from llmload.report import ReportOptions, build_report, parse_slo, write_report
    report = build_report("runs/rag", ReportOptions(slos=[parse_slo("ttft_p95_ms=2000")], gpu_hourly_usd=4.5))
    paths = write_report(report, "out/")      # out/report.md, report.html, report.json, vllm_bench_serve.json

Modules: ``load`` (the CSV, one run), ``run_identity`` (its PREFIX_run.json), ``steps`` (load steps
and what each measured), ``confidence`` (intervals, borderline verdicts), ``capacity``
(capacity, cost, plan), ``model`` (the report's parts), ``build`` (rows → report),
``document``/``render``/``charts``/``format`` (md, html, json), ``compare``/``compare_render``
(several runs side by side).
"""

from __future__ import annotations

from llmload.metrics.slo import parse_slo
from llmload.report.build import build_report
from llmload.report.load import ReportError
from llmload.report.model import Report, ReportOptions
from llmload.report.render import write_all as write_report

__all__ = ["Report", "ReportError", "ReportOptions", "build_report", "parse_slo", "write_report"]
