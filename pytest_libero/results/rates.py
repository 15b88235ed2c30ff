"""Success rates as summary.json writes every rate: counts, rate, 95% Wilson interval.

The one definition shared by the summary, the robustness table and the gates: a rate is
over completed episodes; errored ones are counted apart, never as failures.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from pytest_libero.episode.record import CaseRecord

COMPLETED = ("success", "failure")


def wilson_interval(successes: int, n: int, z: float = 1.959964) -> tuple[float, float]:
    """95% Wilson score interval for a success rate; (0, 1) when nothing completed."""
    if n == 0:
        return 0.0, 1.0
    p = successes / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / (1 + z * z / n)
    return max(0.0, centre - half), min(1.0, centre + half)


def success_rate(records: Iterable[CaseRecord]) -> dict[str, Any]:
    """Rate over completed episodes; errored ones are counted apart, never as failures."""
    completed = [r for r in records if r["outcome"] in COMPLETED]
    return rate_object(sum(r["outcome"] == "success" for r in completed), len(completed))


def rate_object(successes: int, completed: int) -> dict[str, Any]:
    """The rate as summary.json writes every rate: counts, rate, 95% Wilson interval."""
    low, high = wilson_interval(successes, completed)
    return {
        "successes": successes,
        "completed": completed,
        "rate": successes / completed if completed else None,
        "wilson95": [low, high],
    }
