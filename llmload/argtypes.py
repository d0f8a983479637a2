"""Bounded numbers on the command line: one checker for ``llmload``'s own flags and the mock's.

Pure, stdlib only. :func:`number` makes an argparse ``type=`` that parses the text, checks its
bounds and otherwise raises ``argparse.ArgumentTypeError`` with the range in words, which argparse
prints as ``argument --port: expected a port number 0-65535, got 99999``.

Usage::

    p.add_argument("--processes", type=number(above=0, integer=True))       # a whole number > 0
    p.add_argument("--step-seconds", type=number(above=0, noun="seconds"))  # seconds > 0
    p.add_argument("--port", type=PORT)                                     # 0 (any free port) to 65535
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable


def number(*, above: float | None = None, at_least: float | None = None, at_most: float | None = None,
           integer: bool = False, noun: str | None = None) -> Callable[[str], float]:
    """An argparse type for a number ``> above`` (or ``>= at_least``) and ``<= at_most``; ``integer``
    asks for a whole number. ``noun`` names what the number is in the message (default ``a number``
    or ``a whole number``): ``expected NOUN > 0`` / ``NOUN from 0 to 1`` (``NOUN 0-65535`` for whole
    numbers), ``got TEXT``."""
    wanted = noun or ("a whole number" if integer else "a number")
    if above is not None:
        wanted += f" > {above:g}"
    elif at_least is not None and at_most is not None:
        wanted += f" {at_least:g}-{at_most:g}" if integer else f" from {at_least:g} to {at_most:g}"
    elif at_least is not None:
        wanted += f" >= {at_least:g}"
    elif at_most is not None:
        wanted += f" <= {at_most:g}"

    def parse(text: str) -> float:
        try:
            value = int(text) if integer else float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {text!r}") from None
        in_range = not math.isnan(value) and (above is None or value > above) and (
            at_least is None or value >= at_least) and (at_most is None or value <= at_most)
        if not in_range:
            shown = value if integer else repr(text)  # a whole number as parsed; a float as typed
            raise argparse.ArgumentTypeError(f"expected {wanted}, got {shown}")
        return value

    return parse


PORT = number(at_least=0, at_most=65535, integer=True, noun="a port number")
PROBABILITY = number(at_least=0, at_most=1, noun="a probability")
POSITIVE = number(above=0)
POSITIVE_INT = number(above=0, integer=True)
POSITIVE_SECONDS = number(above=0, noun="seconds")
