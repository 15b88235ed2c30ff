"""The plan's numbers, read strictly: a figure from the probe cache, a finished run's
records or the command line is a plain finite number inside stated bounds, or refused by
name.

A plan multiplies and sums what it reads: one figure of 1e308 overflows it, one of 1e300
prints a 300-digit time, a negative one plans a run of "0s", and text or true read as a
number is a figure nobody measured. So nothing is coerced (true is not 1, "3" is not 3)
and every figure has an upper bound no real machine, run or policy comes near. A number
the command line gives is read in ASCII decimal digits (``protocol.digits.decimal``).
"""

from __future__ import annotations

import math
from typing import Any, Final

MINUTE: Final = 60.0
HOUR: Final = 3600.0
DAY: Final = 86400.0
LONGEST_S: Final = 100_000 * HOUR
"""A wall time past this is printed as "over 100000h" (about 11 years), never in full."""



def shown(value: Any) -> str:
    """A value as a message quotes it: cut to a line's share."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def figure(value: Any, what: str, upper: float, unit: str = "s") -> float:
    """``value``, a JSON number from 0 to ``upper``; ValueError naming ``what`` otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{what} is {shown(value)}, not a number")
    try:
        number = float(value) if math.isfinite(value) else math.nan
    except OverflowError:  # a whole number past any float
        number = math.nan
    if not 0 <= number <= upper:
        raise ValueError(f"{what} is {shown(value)}, not a figure from 0 to {upper:g} {unit}".rstrip())
    return number


def count(value: Any, what: str, lowest: int = 0, upper: int = 10**9) -> int:
    """``value``, a JSON whole number from ``lowest`` to ``upper``; ValueError otherwise."""
    if isinstance(value, bool) or not isinstance(value, int) or not lowest <= value <= upper:
        raise ValueError(f"{what} is {shown(value)}, not a count from {lowest} to {upper:,}")
    return value

