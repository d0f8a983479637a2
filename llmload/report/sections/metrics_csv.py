"""Reading a run's long-format metrics file (``PREFIX_server_metrics.csv``, ``PREFIX_gpu_metrics.csv``:
``time,endpoint,metric,labels,value``), shared by the server and the GPU sections of the report.

Usage::

    path, df, problem = read_metrics_csv(candidates, "GPU metrics")   # (None, None, None): no file
"""

from __future__ import annotations

import os

import pandas as pd

from llmload.server_metrics.series import CSV_HEADER


def read_metrics_csv(candidates: list[str], what: str) -> tuple[str | None, pd.DataFrame | None, str | None]:
    """The first non-empty file of ``candidates`` as a frame with numeric ``time`` and ``value``, or
    the one-line reason it is left out (a parse error, a wrong header)."""
    path = next((c for c in candidates if os.path.exists(c) and os.path.getsize(c) > 0), None)
    if path is None:
        return None, None, None
    try:
        df = pd.read_csv(path, dtype={"endpoint": "string", "metric": "string", "labels": "string"},
                         keep_default_na=False, na_values={"time": [""], "value": [""]}, on_bad_lines="skip")
    except (ValueError, pd.errors.ParserError) as e:
        return path, None, f"{path}: cannot parse ({e}); {what} left out"
    if list(df.columns) != list(CSV_HEADER):
        return path, None, f"{path}: expected the header {','.join(CSV_HEADER)}; {what} left out"
    df["time"] = pd.to_numeric(df["time"], errors="coerce")
    df["value"] = pd.to_numeric(df["value"], errors="coerce")
    return path, df, None
