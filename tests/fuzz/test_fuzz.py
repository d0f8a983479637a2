"""The fuzz tier (issue 35): every parser's properties (tests/fuzz/properties.py) on a bounded number
of examples each, the same every run (the ``suite`` profile); the regression inputs earlier fuzzing
found first. ``benchmarks/fuzz.py`` runs the same properties for as long as it is asked."""

from __future__ import annotations

import pytest
from hypothesis import given, settings

from tests.fuzz import profiles
from tests.fuzz.properties import PROPERTIES

pytestmark = pytest.mark.fuzz
settings.load_profile("suite")
assert profiles.CACHE


@pytest.mark.parametrize("p", PROPERTIES, ids=[p.name for p in PROPERTIES])
def test_property(p):
    settings(max_examples=p.max_examples)(given(p.strategy)(p.check))()


REGRESSIONS = [(p, example) for p in PROPERTIES for example in p.examples]


@pytest.mark.parametrize("p,example", REGRESSIONS, ids=[f"{p.name}#{i}" for i, (p, _) in enumerate(REGRESSIONS)])
def test_regression(p, example):
    p.check(example)
