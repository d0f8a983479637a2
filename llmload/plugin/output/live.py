"""The live view: rolling-window LLM stats per scenario, and the history sampled from it. Pure
(times passed in; the plugin writes the history rows to PREFIX_llm_history.csv).

Rows are bucketed by the second their request *completed*; per-chunk ITL comes as histogram
deltas bucketed by the second they arrived. A window covers ``[now − lag − W, now − lag)``:
``lag`` allows for rows still on their way (a worker reports every 3 s), so a window is never
read while its newest seconds are half filled.

Usage::

    live = LiveWindow()
    live.add_row(row)                       # every request row, as it arrives
    live.add_itl("chat", itl_hist, now)     # per-chunk ITL deltas
    rows = live.snapshot(now, lag_s=4.0)    # one dict per scenario + "Aggregated"
    history = LiveHistory(started=time.time())
    history.sample(live, now, lag_s=4.0, users=16, in_flight={"chat": 7}, health=[...])
    history.client                          # the client's judged intervals (health.run_verdict.ClientRun)
"""

from __future__ import annotations

import bisect
from collections import defaultdict
from typing import Any

from llmload.files import COL, WARMUP_PHASE
from llmload.health.run_verdict import ClientRun
from llmload.health.verdict import errors_dominate
from llmload.metrics import catalog
from llmload.metrics.histogram import Histogram
from llmload.metrics.record import OK, rounded
from llmload.metrics.scenario_stats import ScenarioStats, stat_values
from llmload.metrics.stats import AGGREGATED

WINDOW_S = 10.0
HISTORY_INTERVAL_S = 2.0  # a history row per scenario every 2 s (the plugin samples at this pace)
KEEP_S = 120.0
HISTORY_KEEP = 20_000

_SCENARIO = COL.scenario
_START = COL.start_time
_E2E = COL.e2e_ms
_PHASE = COL.phase
_MODEL = COL.model


class LiveWindow:
    def __init__(self, window_s: float = WINDOW_S) -> None:
        self.window_s = window_s
        self._rows: dict[int, dict[str, ScenarioStats]] = defaultdict(dict)
        # The warm-up's rows (phase=warmup) apart: shown live, never judged (the SLO stop, the search)
        self._warmup: dict[int, dict[str, ScenarioStats]] = defaultdict(dict)
        self._itl: dict[int, dict[str, Histogram]] = defaultdict(dict)
        # models: mixes: (scenario, model) → the same, for the per-model rows (warm-up included)
        self._models: dict[int, dict[tuple[str, str], ScenarioStats]] = defaultdict(dict)
        self._model_itl: dict[int, dict[tuple[str, str], Histogram]] = defaultdict(dict)

    def add_row(self, row: tuple) -> None:
        end = row[_START] + (row[_E2E] or 0.0) / 1000.0
        bucket = (self._rows if row[_PHASE] != WARMUP_PHASE else self._warmup)[int(end)]
        s = bucket.get(row[_SCENARIO])
        if s is None:
            s = bucket[row[_SCENARIO]] = ScenarioStats()
        s.add_row(row)
        if len(row) > _MODEL and row[_MODEL]:  # a row cut short (written before the column) has none
            by_model = self._models[int(end)]
            key = (row[_SCENARIO], row[_MODEL])
            m = by_model.get(key)
            if m is None:
                m = by_model[key] = ScenarioStats()
            m.add_row(row)

    def add_itl(self, scenario: str, hist: Histogram, now: float) -> None:
        bucket = self._itl[int(now)]
        h = bucket.get(scenario)
        if h is None:
            bucket[scenario] = h = Histogram()
        h.merge(hist)

    def add_itl_delta(self, wire: dict[str, Any], now: float) -> None:
        """The ITL histograms of a stats delta (:meth:`llmload.metrics.stats.LLMStats.take_delta`)."""
        for name, data in wire.items():
            itl = data.get("histograms", {}).get("itl")
            if itl:
                self.add_itl(name, Histogram.from_wire(itl), now)
            for model, part in (data.get("models") or {}).items():
                itl = part.get("histograms", {}).get("itl")
                if itl:
                    bucket = self._model_itl[int(now)]
                    h = bucket.get((name, model))
                    if h is None:
                        h = bucket[(name, model)] = Histogram()
                    h.merge(Histogram.from_wire(itl))

    def prune(self, now: float) -> None:
        cutoff = int(now - KEEP_S)
        for store in (self._rows, self._warmup, self._itl, self._models, self._model_itl):
            for sec in [s for s in store if s < cutoff]:
                del store[sec]

    def merged(self, now: float, lag_s: float, warmup: bool = True) -> tuple[dict[str, ScenarioStats], float]:
        """Per scenario, the stats of the window (``warmup``: the warm-up's rows too); and the window's
        length in seconds."""
        hi = int(now - lag_s)
        lo = hi - int(self.window_s)
        out: dict[str, ScenarioStats] = {}
        stores = (self._rows, self._warmup) if warmup and self._warmup else (self._rows,)
        for sec in range(lo, hi):
            for store in stores:
                for name, s in store.get(sec, {}).items():
                    t = out.get(name)
                    if t is None:
                        t = out[name] = ScenarioStats()
                    t.merge(s)
            for name, h in self._itl.get(sec, {}).items():
                t = out.get(name)
                if t is None:
                    t = out[name] = ScenarioStats()
                t.hist["itl"].merge(h)
        return out, float(hi - lo)

    def model_snapshot(self, now: float, lag_s: float) -> list[dict[str, Any]]:
        """One live row per (scenario, model) of a models: mix over the window, with a ``model`` key."""
        hi = int(now - lag_s)
        lo = hi - int(self.window_s)
        out: dict[tuple[str, str], ScenarioStats] = {}
        for sec in range(lo, hi):
            for key, s in self._models.get(sec, {}).items():
                t = out.get(key)
                if t is None:
                    t = out[key] = ScenarioStats()
                t.merge(s)
            for key, h in self._model_itl.get(sec, {}).items():
                if key in out:
                    out[key].hist["itl"].merge(h)
        return [{**window_row(name, s, float(hi - lo)), "model": model} for (name, model), s in sorted(out.items())]

    def snapshot(self, now: float, lag_s: float) -> list[dict[str, Any]]:
        per, w = self.merged(now, lag_s)
        rows = [window_row(name, s, w) for name, s in sorted(per.items())]
        if len(per) != 1:  # with no data yet, an empty Aggregated row still carries users and in-flight
            total = ScenarioStats()
            for s in per.values():
                total.merge(s)
            rows.append(window_row(AGGREGATED, total, w))
        return rows


def window_row(name: str, s: ScenarioStats, window_s: float) -> dict[str, Any]:
    """One live row: counts, rates and every catalog metric's ``live`` statistics (``ttft_p95_ms``)."""
    errors = {k: v for k, v in s.status_counts.items() if k not in (OK, "cancelled")}
    n_errors = sum(errors.values())
    row: dict[str, Any] = {
        "scenario": name,
        "window_s": window_s,
        "requests": s.requests,
        "ok": s.ok,
        "errors": n_errors,
        "errors_by_status": errors,
        "rps": rounded(s.ok / window_s, 3),
        "output_tps": rounded(s.output_tokens / window_s, 1),
    }
    for metric in catalog.METRICS:  # ttft mean is there to stand next to the server's (exact) mean
        row.update(zip((metric.key(st) for st in metric.live), stat_values(s.hist[metric.name], metric.live, 2),
                       strict=True))
    row.update({
        "cache_hit_ratio": rounded(s.cached_tokens / s.prompt_tokens, 4) if s.prompt_tokens else None,
        "backoff_s": rounded(s.backoff_ms / 1000.0, 3),
        "errors_dominate": errors_dominate(s.ok + n_errors, n_errors),
        "_stats": s,
    })
    return catalog.with_old_keys(row)


class LiveHistory:
    """The live window sampled every interval: one row per scenario (and Aggregated), kept in
    memory for the LLM tab and the dashboard, with which client processes limited the run."""

    def __init__(self, started: float | None = None, interval_s: float = HISTORY_INTERVAL_S) -> None:
        # Kept as (keys, values) tuples, the keys shared: a dict per sample cost ~2.5 kB, and a
        # long run keeps up to HISTORY_KEEP of them (benchmarks/soak.py watches the growth).
        self._rows: list[tuple[tuple[str, ...], tuple]] = []
        self._times: list[float] = []
        self._shapes: dict[tuple[str, ...], tuple[str, ...]] = {}
        self.started = started  # the test's start (Unix seconds): "at 0:42" in the client's verdict
        self.client = ClientRun(interval_s)  # the client's judged intervals: the summary and the dashboard read it
        self._judged: dict[Any, Any] = {}  # worker → the seq of its health sample last judged
        self.models_latest: list[dict[str, Any]] = []  # the newest sample's per-model rows (models: mixes)

    @property
    def limited_intervals(self) -> list[str]:
        """One text per interval in which a client was limited."""
        return self.client.limited

    @property
    def error_intervals(self) -> list[str]:
        """One text per interval in which errors dominated."""
        return self.client.errors

    @property
    def limited_causes(self) -> dict[str, int]:
        """health.verdict's cause → intervals."""
        return self.client.causes

    def sample(self, live: LiveWindow, now: float, lag_s: float, users: int, in_flight: dict[str, int],
               health: list[dict[str, Any]]) -> list[dict[str, Any]]:
        """One row per scenario over the window ending ``lag_s`` before ``now``."""
        live.prune(now)
        rows = live.snapshot(now, lag_s)
        self.models_latest = [{k: v for k, v in r.items() if k != "_stats"} for r in live.model_snapshot(now, lag_s)]
        limited = [h for h in health if h.get("limited")]
        # A worker's sample (every 3 s) can be the newest at two history samples (every 2 s): judged once
        fresh = [h for h in limited if self._judged.get(h.get("worker")) != h.get("seq", object())]
        self._judged.update((h.get("worker"), h.get("seq")) for h in health)
        total = rows[-1]  # Aggregated, or the only scenario
        errors = ""
        if total["errors_dominate"]:  # the server's failures first; the client is not blamed for them
            by_status = ", ".join(f"{k} {v}" for k, v in sorted(total["errors_by_status"].items()))
            errors = f"{total['errors']} of {total['ok'] + total['errors']} failed ({by_status})"
            limited = []
        self.client.judge(now - (self.started if self.started is not None else self._first(now)), fresh, errors)
        total_in_flight = sum(in_flight.values())
        out = []
        for r in rows:
            r = {k: v for k, v in r.items() if k != "_stats"}
            r.update({
                "time": round(now, 3), "users": users,
                "in_flight": total_in_flight if r["scenario"] == AGGREGATED or len(rows) == 1
                else in_flight.get(r["scenario"], 0),
                "client_cpu_max": max((h["cpu"] for h in health), default=None),
                "client_lag_p99_ms_max": max((h["lag_p99_ms"] for h in health), default=None),
                "client_limited": bool(limited),
                "client_cause": ",".join(sorted({h.get("cause") or "process" for h in limited})),
                "client_stalls": sum(h.get("stalls_over_2ms", 0) for h in health),
                "client_stall_max_ms": _max_of(health, "stall_max_ms"),
                "client_stall_cpu_max_ms": _max_of(health, "stall_cpu_max_ms"),
                "client_steal_pct_max": _max_of(health, "steal_pct"),
                "client_others_cpu_max": _max_of(health, "others_cpu"),
                "client_run_queue_max": _max_of(health, "run_queue"),
            })
            out.append(r)
            keys = tuple(r)
            self._rows.append((self._shapes.setdefault(keys, keys), tuple(r.values())))
            self._times.append(r["time"])
        del self._rows[:-HISTORY_KEEP]
        del self._times[:-HISTORY_KEEP]
        return out

    def _first(self, now: float) -> float:
        if self.started is None:
            self.started = (self._times[0] if self._times else now) - self.client.interval_s
        return self.started

    @property
    def rows(self) -> list[dict[str, Any]]:
        """Every sample kept, oldest first (one dict per scenario and time)."""
        return self.rows_since(float("-inf"))

    def rows_since(self, t: float) -> list[dict[str, Any]]:
        """The samples taken after ``t`` (Unix seconds)."""
        return [dict(zip(k, v, strict=True)) for k, v in self._rows[bisect.bisect_right(self._times, t):]]

    def latest(self) -> list[dict[str, Any]]:
        """The rows of the newest sample."""
        if not self._times:
            return []
        newest = self._times[-1]
        return [dict(zip(k, v, strict=True)) for k, v in self._rows[bisect.bisect_left(self._times, newest):]]


def _max_of(health: list[dict[str, Any]], key: str) -> float | None:
    values = [h[key] for h in health if h.get(key) is not None]
    return max(values) if values else None
