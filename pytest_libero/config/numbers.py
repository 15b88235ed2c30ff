"""The one reader of a number of seconds, for every option and profile key that takes one.

NaN passes every comparison (``nan < 0`` and ``nan <= 0`` are both false), so a check
written as "refuse negatives" lets it through, and a wait of NaN seconds never ends.
Infinity and huge values overflow the millisecond timeouts of sockets. Every seconds
value is read here, finite and bounded.

And a number written as text is read here: Python's int() and float() take far more than
a user types ("１/2" is 1/2 to int(), as are " 1 " and "1_0"; float() also takes "nan" and
"infinity"), so an option or a variable is read in ASCII decimal digits only
(:func:`decimal`, :func:`whole`).
"""

from __future__ import annotations

import argparse
import math
import re
from typing import Final

MAX_SECONDS: Final = 7 * 24 * 3600.0
"""The longest wait or timeout read (a week): longer is a typo, and overflows sockets."""


_WHOLE = re.compile(r"[+-]?[0-9]+", re.ASCII)
_DECIMAL = re.compile(r"[+-]?([0-9]+(\.[0-9]*)?|\.[0-9]+)([eE][+-]?[0-9]+)?", re.ASCII)


def whole(text: str) -> int | None:
    """``text`` as a whole number written in ASCII digits (a sign allowed), else None."""
    return int(text) if _WHOLE.fullmatch(text) else None


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


def seconds(value: object, *, allow_zero: bool = False) -> float:
    """``value`` as seconds, or ValueError saying what is allowed."""
    allowed = (f"{'zero or more' if allow_zero else 'a positive number of'} seconds, "
               f"at most {MAX_SECONDS:g}")
    if isinstance(value, bool) or not isinstance(value, (int, float, str)):
        raise ValueError(allowed)
    try:
        number = float(value) if not isinstance(value, str) else decimal(value.strip())
    except OverflowError:
        number = None
    if number is None or not math.isfinite(number) or number < 0 or number > MAX_SECONDS or (
            number == 0 and not allow_zero):
        raise ValueError(allowed)
    return number
