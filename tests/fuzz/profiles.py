"""Hypothesis profiles: ``suite`` for `make test` (the same examples every run, no database: a test
that passes once passes again), ``explore`` for benchmarks/fuzz.py (new examples each run, failures
kept in a database under the cache directory, never in the repository)."""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

CACHE = os.environ.get("LLMLOAD_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "llmload")
_RELAXED = [HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much,
            HealthCheck.large_base_example]

settings.register_profile("suite", deadline=None, derandomize=True, database=None, suppress_health_check=_RELAXED,
                          print_blob=True)
settings.register_profile("explore", deadline=None, database=DirectoryBasedExampleDatabase(
    os.path.join(CACHE, "hypothesis")), suppress_health_check=_RELAXED, print_blob=True)
