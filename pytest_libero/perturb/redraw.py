"""Draw again until a draw stands: the loop every kind that can be rejected shares.

A kind's draw may not fit the scene (the arm touches something, a moved object does not
come to rest). It is drawn again deterministically, the next attempt's seed, and each
rejection is kept for the record; when every attempt is rejected the task has no room
for the level, and the case errors as an environment fault saying the last reason.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TypeVar

from pytest_libero.protocol.errors import EnvironmentFault

Drawn = TypeVar("Drawn")


def first_standing(attempts: int, tried: Callable[[int], tuple[Drawn, list[str]]], kept: int,
                   refused: Callable[[list[str]], str]) -> tuple[Drawn, list[list[str]]]:
    """The first of ``attempts`` draws whose problems (``tried(attempt)``) are none, and the
    first ``kept`` problems of each rejected one; EnvironmentFault(``refused(last)``) when
    every draw was rejected."""
    rejected: list[list[str]] = []
    for attempt in range(attempts):
        drawn, problems = tried(attempt)
        if not problems:
            return drawn, rejected
        rejected.append(problems[:kept])
    raise EnvironmentFault(refused(rejected[-1]))
