"""Writes deploy/grafana/llmload.json: llmload's own metrics (``/llmload/metrics`` on the web UI)
beside vLLM's and NVIDIA dcgm-exporter's, on one time axis. Run it after changing a panel; the
test tests/unit/test_grafana_dashboard.py checks that every query names a series llmload, the
mock's vLLM format or the dcgm-exporter fixture really exports.

    python scripts/grafana_dashboard.py          # rewrites the file
"""

from __future__ import annotations

import json
import os

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
OUT = os.path.join(ROOT, "deploy", "grafana", "llmload.json")

Q = "histogram_quantile({q}, sum by (le, scenario) (rate({name}_bucket[$__rate_interval])))"
TTFT = "gen_ai_client_operation_time_to_first_chunk_seconds"
R = "[$__rate_interval]"
ROWS: list[tuple[str, list[tuple[str, str, list[tuple[str, str]]]]]] = [
    ("llmload: what the users got", [
        ("TTFT", "s", [("p50 {{scenario}}", Q.format(q=0.5, name=TTFT)),
                       ("p95 {{scenario}}", Q.format(q=0.95, name=TTFT))]),
        ("TPOT", "s", [("p95 {{scenario}}", Q.format(q=0.95, name="llmload_client_time_per_output_token_seconds"))]),
        ("Worst gap between tokens", "s", [("p99 {{scenario}}",
                                             Q.format(q=0.99, name="llmload_client_itl_max_seconds"))]),
        ("E2E", "s", [("p99 {{scenario}}", Q.format(q=0.99, name="gen_ai_client_operation_duration_seconds"))]),
        ("Requests by status", "reqps", [("{{status}}", f"sum by (status) (rate(llmload_requests_total{R}))")]),
        ("Tokens", "short", [("{{gen_ai_token_type}} tok/s",
                              "sum by (gen_ai_token_type) (rate(llmload_tokens_total[$__rate_interval]))")]),
        ("Users and requests in flight", "short", [("users", "sum(llmload_running_users)"),
                                                   ("in flight", "sum(llmload_requests_in_flight)")]),
        ("Client limited", "short", [("client limited (1 = yes)", "max(llmload_client_limited)"),
                                     ("client CPU % (max)", "max(llmload_client_cpu_percent_max)")]),
    ]),
    ("vLLM: what the server did", [
        ("Batch and queue", "short", [("running", "sum(vllm:num_requests_running)"),
                                      ("waiting", "sum(vllm:num_requests_waiting)")]),
        ("KV cache in use", "percentunit", [("KV cache", "max(vllm:kv_cache_usage_perc)")]),
        ("Server TTFT", "s", [("p95", "histogram_quantile(0.95, sum by (le) "
                                      "(rate(vllm:time_to_first_token_seconds_bucket[$__rate_interval])))")]),
        ("Server tokens", "short", [("prompt tok/s", "sum(rate(vllm:prompt_tokens_total[$__rate_interval]))"),
                                    ("generated tok/s", "sum(rate(vllm:generation_tokens_total[$__rate_interval]))")]),
    ]),
    ("GPUs (dcgm-exporter)", [
        # the default counters of dcgm-exporter: GR_ENGINE_ACTIVE, not SM_ACTIVE (commented out there)
        ("Activity", "percentunit", [("graphics engine {{gpu}} {{Hostname}}",
                                      "avg by (gpu, Hostname) (DCGM_FI_PROF_GR_ENGINE_ACTIVE)"),
                                     ("DRAM {{gpu}} {{Hostname}}", "avg by (gpu, Hostname) (DCGM_FI_PROF_DRAM_ACTIVE)"),
                                     ("tensor {{gpu}} {{Hostname}}",
                                      "avg by (gpu, Hostname) (DCGM_FI_PROF_PIPE_TENSOR_ACTIVE)")]),
        ("Utilisation", "percent", [("{{gpu}} {{Hostname}}", "avg by (gpu, Hostname) (DCGM_FI_DEV_GPU_UTIL)")]),
        ("Power", "watt", [("{{gpu}} {{Hostname}}", "sum by (gpu, Hostname) (DCGM_FI_DEV_POWER_USAGE)")]),
        ("Memory used", "decmbytes", [("{{gpu}} {{Hostname}}", "sum by (gpu, Hostname) (DCGM_FI_DEV_FB_USED)")]),
        ("Energy per output token", "J", [("J/token", f"sum(rate(DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION{R})) / 1000 "
                                                      f"/ sum(rate(llmload_tokens_total{{gen_ai_token_type=\"output\"}}"
                                                      f"{R}))")]),
        # a throttled GPU shows as a falling SM clock (the clock-event reasons are not a default counter)
        ("SM clock and XID errors", "short", [("SM clock MHz {{gpu}}", "max by (gpu) (DCGM_FI_DEV_SM_CLOCK)"),
                                              ("last XID {{gpu}}", "max by (gpu) (DCGM_FI_DEV_XID_ERRORS)")]),
    ]),
]


def dashboard() -> dict:
    panels, y, pid = [], 0, 1
    for title, row in ROWS:
        panels.append({"type": "row", "title": title, "id": pid, "collapsed": False,
                       "gridPos": {"h": 1, "w": 24, "x": 0, "y": y}})
        pid, y = pid + 1, y + 1
        for i, (name, unit, targets) in enumerate(row):
            panels.append({
                "type": "timeseries", "title": name, "id": pid,
                "datasource": {"type": "prometheus", "uid": "${datasource}"},
                "fieldConfig": {"defaults": {"unit": unit, "min": 0}, "overrides": []},
                "gridPos": {"h": 8, "w": 6, "x": (i % 4) * 6, "y": y + (i // 4) * 8},
                "targets": [{"refId": chr(65 + k), "expr": expr, "legendFormat": legend,
                             "datasource": {"type": "prometheus", "uid": "${datasource}"}}
                            for k, (legend, expr) in enumerate(targets)],
            })
            pid += 1
        y += ((len(row) + 3) // 4) * 8
    return {
        "title": "llmload: load test, server and GPUs", "uid": "llmload", "schemaVersion": 39, "version": 1,
        "editable": True, "time": {"from": "now-30m", "to": "now"}, "refresh": "5s",
        "tags": ["llmload", "vllm", "dcgm"],
        "templating": {"list": [{"type": "datasource", "name": "datasource", "label": "Prometheus",
                                 "query": "prometheus"}]},
        "panels": panels,
    }


if __name__ == "__main__":
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    with open(OUT, "w", encoding="utf-8") as f:
        json.dump(dashboard(), f, indent=2)
        f.write("\n")
    print(f"wrote {OUT}")
