"""Run summaries from case records: outcome classes (P11) and success rates.

Pure functions over plain records, shared by the live recorder, the merge command and
the gate, so every path computes the same numbers."""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
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
    successes = sum(r["outcome"] == "success" for r in completed)
    low, high = wilson_interval(successes, len(completed))
    return {
        "successes": successes,
        "completed": len(completed),
        "rate": successes / len(completed) if completed else None,
        "wilson95": [low, high],
    }


def summarize(
    selected: Sequence[str], records: Mapping[str, CaseRecord], **identity: Any
) -> dict[str, Any]:
    """Counts of every outcome class and rates per suite and overall."""
    done = [records[c] for c in selected if c in records]
    outcomes = Counter(r["outcome"] for r in done)
    by_suite: dict[str, list[CaseRecord]] = {}
    for record in done:
        by_suite.setdefault(record["entry"]["suite"], []).append(record)
    return {
        **identity,
        "counts": {
            "selected": len(selected),
            "completed": outcomes["success"] + outcomes["failure"],
            "success": outcomes["success"],
            "failure": outcomes["failure"],
            "errored": outcomes["errored"],
            "unattempted": len(selected) - len(done),
        },
        "overall": success_rate(done),
        "suites": {suite: success_rate(rs) for suite, rs in by_suite.items()},
        "errored": [r["case"] for r in done if r["outcome"] == "errored"],
        "unattempted": [c for c in selected if c not in records],
        "clipping": clipping_totals(done),
    }


def clipping_totals(records: Iterable[CaseRecord]) -> dict[str, Any]:
    """Clipped action values over the run (out_of_bounds = "clip"); zeros when strict."""
    clipped = [t for r in records if (t := r.get("clipping")) and t["values"]]
    return {
        "cases": len(clipped),
        "chunks": sum(t["chunks"] for t in clipped),
        "values": sum(t["values"] for t in clipped),
        "max_excess": max((t["max_excess"] for t in clipped), default=0.0),
    }
