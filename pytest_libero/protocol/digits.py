"""Numbers written as text, read in ASCII decimal digits only, for every option, variable
and command-line number.

Python's int() and float() take far more than a user types: "１/2" is 1/2 to int(), as are
" 1 " and "1_0"; float() also takes "nan" and "infinity". A number a person typed is
read here, or refused by name by its caller.
"""

from __future__ import annotations

import argparse
import math
import re

_WHOLE = re.compile(r"[+-]?[0-9]+", re.ASCII)
_DECIMAL = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?", re.ASCII)


WHOLE_DIGITS = 30
"""More digits than any bound of this package allows (and past Python's own limit for
turning text into a number, 4,300 digits, int() raises instead of answering)."""


def whole(text: str) -> int | None:
    """``text`` as a whole number written in ASCII digits (a sign allowed, at most
    WHOLE_DIGITS of them), else None."""
    return int(text) if len(text) <= WHOLE_DIGITS + 1 and _WHOLE.fullmatch(text) else None


def decimal(text: str) -> float | None:
    """``text`` as a number written in ASCII decimal digits (a sign, a point and an
    exponent allowed), else None; 1e309 reads as inf, for a bound to refuse."""
    return float(text) if _DECIMAL.fullmatch(text) else None


def whole_arg(text: str) -> int:
    """An argparse ``type``: :func:`whole`, its refusal argparse's own line."""
    number = whole(text)
    if number is None:
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a whole number in digits 0-9")
    return number


def decimal_arg(text: str) -> float:
    """An argparse ``type``: :func:`decimal` and finite, its refusal argparse's own line."""
    number = decimal(text)
    if number is None or not math.isfinite(number):
        raise argparse.ArgumentTypeError(f"{text[:40]!r} is not a finite number in digits 0-9")
    return number
