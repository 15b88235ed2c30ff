"""The one reader of a number of seconds, for every option and profile key that takes one.

NaN passes every comparison (``nan < 0`` and ``nan <= 0`` are both false), so a check
written as "refuse negatives" lets it through, and a wait of NaN seconds never ends.
Infinity and huge values overflow the millisecond timeouts of sockets. Every seconds
value is read here, finite and bounded; one written as text, in ASCII decimal digits
only (``protocol.digits``).
"""

from __future__ import annotations

import math
from typing import Final

from pytest_libero.protocol.digits import decimal

MAX_SECONDS: Final = 7 * 24 * 3600.0
"""The longest wait or timeout read (a week): longer is a typo, and overflows sockets."""


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
