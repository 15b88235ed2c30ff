"""The partial-credit score of a case, in [0, 1] (docs/records.md, "Progress and score").

A success scores 1. A failure scores the largest fraction of its goal's predicates that
held at once. A goal of one predicate holds only at success, so its failures are scored
by the safety axis's engagement ladder instead, at fixed levels: idle 0, reached 0.25,
manipulated 0.5 (what one predicate of two earns). An errored case, or a record without
``progress`` (written before it existed, or by an adapter that does not track it), has
no score.

A score is derived data: every reader takes :func:`derived_score` (recomputed from the
record's outcome, progress and engagement), never the ``score`` a record holds, which is
only compared with it (:func:`score_disagreement`): a forged score is refused, not summed.
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


def derived_score(record: Mapping[str, Any]) -> float | None:
    """The score a record stands on: recomputed from its outcome, progress and engagement
    (None without progress), so an edited ``score`` field changes nothing it feeds."""
    progress = record.get("progress")
    if not isinstance(progress, Mapping):
        return None
    engagement = record.get("engagement")
    return case_score(str(record["outcome"]), progress, engagement if isinstance(engagement, str) else None)


def score_disagreement(record: Mapping[str, Any]) -> str | None:
    """Why the record's own ``score`` is not the one it stands on, or None: a score with no
    progress under it, or one its outcome, progress and engagement do not give."""
    if "score" not in record:
        return None
    recorded, derived = record["score"], derived_score(record)
    if not isinstance(record.get("progress"), Mapping):
        if recorded is None:
            return None
        return (f"has score {str(recorded)[:20]}, but no 'progress' for it to stand on (a score "
                "is derived from the goal's progress, never recorded alone)")
    if recorded != derived or isinstance(recorded, bool):
        return (f"has score {str(recorded)[:20]}, but its outcome, progress and engagement give "
                f"{derived} (a score is derived, never read as written)")
    return None
