"""The fuzz tier's properties (tests/fuzz/properties.py) for as long as asked: new random examples in
batches, property after property, until the time is up; then the examples each ran and every
failure (its falsifying input, as Hypothesis prints it). Failures are kept in Hypothesis's database
under the cache directory (``$LLMLOAD_CACHE/hypothesis``), so the next run tries them first; each
one found becomes a regression case in ``Property.examples`` and a fix.

Usage::

    python benchmarks/fuzz.py --minutes 30            # one core: nothing else beside it
    python benchmarks/fuzz.py --minutes 1 --only sse  # properties whose name contains "sse"
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import traceback

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from hypothesis import given, settings  # noqa: E402

from tests.fuzz import profiles  # noqa: E402
from tests.fuzz.properties import PROPERTIES  # noqa: E402

BATCH = 200


def counting(p, counts: dict[str, int]):
    def counted(value):
        counts[p.name] += 1
        p.check(value)
    return counted


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--minutes", type=float, default=30.0)
    ap.add_argument("--only", default="", help="run the properties whose name contains this")
    ap.add_argument("--json", default="", help="also write the counts here")
    args = ap.parse_args()
    settings.load_profile("explore")
    chosen = [p for p in PROPERTIES if args.only in p.name]
    counts = {p.name: 0 for p in chosen}
    failures: dict[str, list[str]] = {p.name: [] for p in chosen}
    t_end = time.monotonic() + args.minutes * 60
    rounds = 0
    print(f"fuzz: {len(chosen)} properties for {args.minutes:g} min (database {profiles.CACHE}/hypothesis)",
          flush=True)
    while time.monotonic() < t_end:
        live = [p for p in chosen if len(failures[p.name]) < 3]  # one that keeps failing: its cases are known
        if not live:
            break
        rounds += 1
        for p in live:
            if time.monotonic() >= t_end:
                break
            try:
                settings(max_examples=BATCH)(given(p.strategy)(counting(p, counts)))()
            except Exception as e:  # a falsified property: record it and go on with the others
                text = "".join(traceback.format_exception(e)).strip()
                text = text if len(text) < 6000 else text[:3000] + "\n[...]\n" + text[-3000:]  # the error and the input
                failures[p.name].append(text)
                print(f"FAILED {p.name}:\n{text}\n", flush=True)
    print(f"\n{rounds} rounds; examples run per property:")
    for name, n in sorted(counts.items(), key=lambda kv: -kv[1]):
        mark = f"  FAILED x{len(failures[name])}" if failures[name] else ""
        print(f"{n:>10,}  {name}{mark}")
    print(f"{sum(counts.values()):>10,}  in all")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"minutes": args.minutes, "counts": counts, "failures": failures}, f, indent=1)
    return 1 if any(failures.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
