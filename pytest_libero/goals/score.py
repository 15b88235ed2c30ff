"""The partial-credit score of a case, in [0, 1] (docs/records.md, "Progress and score").

A success scores 1. A failure scores the largest fraction of its goal's predicates that
held at once. A goal of one predicate holds only at success, so its failures are scored
by the safety axis's engagement ladder instead, at fixed levels: idle 0, reached 0.25,
manipulated 0.5 (what one predicate of two earns). An errored case, or a record without
``progress`` (written before it existed, or by an adapter that does not track it), has
no score.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

SCORE_VERSION = "pytest-libero-score/1"
LADDER: Final[Mapping[str, float]] = {"idle": 0.0, "reached": 0.25, "manipulated": 0.5, "success": 1.0}
"""A one-predicate goal's failure, by how far it got with its goal objects (the rungs are
``safety.verdict.ENGAGEMENT``'s)."""


def case_score(outcome: str, progress: Mapping[str, Any] | None, engagement: str | None) -> float | None:
    """The score of a case with this outcome, progress record and engagement."""
    if outcome == "errored" or progress is None:
        return None
    if outcome == "success":
        return 1.0
    count = len(progress["predicates"])
    if count == 1:
        return LADDER.get(engagement or "idle", 0.0)
    if count == 0:
        return 0.0
    return int(progress["most_held"]) / count


def score_problem(value: Any) -> str | None:
    """Why a record's ``score`` is neither a number in [0, 1] nor null, or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        return f"is {str(value)[:20]!r}, not a score from 0 to 1 (or null)"
    return None
