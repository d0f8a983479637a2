"""One bounded-number checker for llmload's flags and the mock's: the value, or argparse's error in words."""

from __future__ import annotations

import argparse

import pytest

from llmload.argtypes import PORT, POSITIVE, POSITIVE_INT, POSITIVE_SECONDS, PROBABILITY, number


@pytest.mark.parametrize("check,text,value", [
    (PORT, "0", 0), (PORT, "65535", 65535), (PROBABILITY, "0", 0.0), (PROBABILITY, "1", 1.0),
    (POSITIVE, "2.5", 2.5), (POSITIVE_INT, " 3 ", 3), (POSITIVE_SECONDS, "0.001", 0.001),
    (number(at_least=-1), "-1", -1.0), (number(at_most=5, integer=True), "-7", -7),
])
def test_a_number_in_its_bounds_is_taken(check, text, value):
    got = check(text)
    assert got == value and type(got) is type(value)


@pytest.mark.parametrize("check,text,message", [
    (PORT, "99999", "expected a port number 0-65535, got 99999"),
    (PORT, "http", "expected a port number 0-65535, got 'http'"),
    (PROBABILITY, "1.5", "expected a probability from 0 to 1, got '1.5'"),
    (PROBABILITY, "nan", "expected a probability from 0 to 1, got 'nan'"),
    (POSITIVE, "0", "expected a number > 0, got '0'"),
    (POSITIVE_INT, "1.5", "expected a whole number > 0, got '1.5'"),
    (POSITIVE_INT, "0", "expected a whole number > 0, got 0"),
    (POSITIVE_SECONDS, "-2", "expected seconds > 0, got '-2'"),
    (number(at_least=1), "0.5", "expected a number >= 1, got '0.5'"),
    (number(at_most=8, integer=True, noun="a count"), "9", "expected a count <= 8, got 9"),
])
def test_a_number_out_of_bounds_says_the_range(check, text, message):
    with pytest.raises(argparse.ArgumentTypeError) as e:
        check(text)
    assert str(e.value) == message
