"""Checks on a report's ``server`` entries that hold for any engine the client measured."""

from __future__ import annotations

from typing import Any


def assert_same_requests_and_no_negative_gap(steps: list[dict[str, Any]]) -> None:
    """At every step the server's delta and the client's side count the same requests, and the mean
    TTFT gap (client − server) is not below 0 beyond the bounding scrapes' resolution.

    A request whose span from its start to its first token reaches across a scrape's edge (within its
    duration) can fall on the other side for the server: the counts then differ by at most the
    requests ``straddling`` each edge, and the mean can move by up to such a request's TTFT ÷ n per
    request, which the bound allows for (and says so when it fails)."""
    for s in steps:
        sv = s["server"]
        counts, gap, window = sv["ttft_requests"], sv["ttft_gap_ms"], sv["window"]
        assert counts and gap and window, (s["users"], sv)
        n_server, n_client, edges = counts["server"], counts["client"], counts["straddling"]
        assert n_client > 0 and n_client - edges["first"] <= n_server <= n_client + edges["last"], (s["users"], counts)
        slack = window["resolution_ms"] + 1.0  # the CSV keeps scrape times to the ms
        if n_server != n_client:
            slack += abs(n_server - n_client) * (sv["client_ttft_ms"]["p95"] or 0.0) / n_client
        assert gap["mean"] >= -slack, (f"step {s['users']}: mean TTFT gap {gap['mean']} ms below -{slack:.1f} ms "
                                       f"over {counts}", sv)
