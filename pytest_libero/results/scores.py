"""The partial-credit score over a run's records (docs/records.md, "Progress and score").

The mean score of the completed cases that have one, with a 95% interval valid for any
scores in [0, 1] (``betting.bounded_mean_interval``: Wilson's interval is for 0/1
outcomes only). Completed cases without a score (older records, adapters that do not
track progress) are counted apart, never as zeros.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pytest_libero.episode.record import CaseRecord
from pytest_libero.goals.score import SCORE_VERSION, derived_score
from pytest_libero.results.betting import bounded_mean_interval
from pytest_libero.results.rates import COMPLETED

ALPHA = 0.05


def scored(record: Mapping[str, Any]) -> float | None:
    """A completed case's score, None when it has none: recomputed from its progress,
    never the number its ``score`` field holds (``goals.score.derived_score``)."""
    return derived_score(record) if record["outcome"] in COMPLETED else None


def has_scores(records: Iterable[Mapping[str, Any]]) -> bool:
    return any(scored(r) is not None for r in records)


def score_object(records: Iterable[CaseRecord]) -> dict[str, Any]:
    """summary.json's ``score``: how many completed cases have one, their mean, its interval."""
    completed = [r for r in records if r["outcome"] in COMPLETED]
    values = [v for r in completed if (v := scored(r)) is not None]
    low, high = bounded_mean_interval(values, ALPHA)
    return {"version": SCORE_VERSION, "scored": len(values), "unscored": len(completed) - len(values),
            "mean": sum(values) / len(values) if values else None, "interval95": [low, high]}


def paired_scores(pairs: Iterable[tuple[Mapping[str, Any], Mapping[str, Any]]]) -> dict[str, Any] | None:
    """Over (twin, perturbed) pairs that both have a score: both means and the drop in
    points (twin minus perturbed, x100), beside the success rates' drop; None without any."""
    both = [(a, b) for twin, perturbed in pairs
            if (a := scored(twin)) is not None and (b := scored(perturbed)) is not None]
    if not both:
        return None
    twin = sum(a for a, _ in both) / len(both)
    perturbed = sum(b for _, b in both) / len(both)
    return {"pairs": len(both), "twin_mean": twin, "perturbed_mean": perturbed,
            "drop_points": 100.0 * (twin - perturbed)}
