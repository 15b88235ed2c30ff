"""What the policy's latency did to a run: percentiles of every call's wall time, how much
of the simulated time the robot held, and the decisions per simulated second.

Every run measures latency, synchronous ones too: a call's latency is the wall time
around it as the evaluator saw it (its codec and transport included). On the realtime
track those latencies set the delays (protocol/clock.py); the block says which track it
was, so no reader compares the two.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from pytest_libero.episode.record import CaseRecord
from pytest_libero.protocol.clock import CONTROL_PERIOD_S
from pytest_libero.results.robustness import suite_key

PERCENTILES = (50, 95, 99)


def latencies(records: Iterable[CaseRecord]) -> list[float]:
    """Every recorded call's latency (records from before latencies were kept add none)."""
    return [float(chunk["latency_s"]) for record in records
            for chunk in record.get("chunks") or [] if chunk.get("latency_s") is not None]


def percentiles(values: Sequence[float]) -> dict[str, Any]:
    """p50, p95, p99 and the maximum, in seconds, over ``values`` (linear interpolation)."""
    found = np.percentile(np.asarray(values, dtype=np.float64), PERCENTILES)
    return {"calls": len(values), **{f"p{p}_s": round(float(v), 6) for p, v in zip(PERCENTILES, found)},
            "max_s": round(max(values), 6)}


def clock_figures(records: Sequence[CaseRecord]) -> dict[str, Any]:
    """The held-control ratio and the decisions per simulated second (a control is 50 ms)."""
    controls = sum(r["counters"]["executed_controls"] for r in records)
    held = sum(r["counters"].get("held_controls", 0) for r in records)
    decisions = sum(r["counters"]["decisions"] for r in records)
    return {"held_control_ratio": round(held / controls, 6) if controls else None,
            "decisions_per_simulated_s": (round(decisions / (controls * CONTROL_PERIOD_S), 6)
                                          if controls else None),
            "stale_actions": sum(r["counters"].get("stale_actions", 0) for r in records)}


def latency_summary(records: Sequence[CaseRecord], clock: str) -> dict[str, Any] | None:
    """summary.json's ``latency`` block, overall and per suite; None when no record kept
    a latency."""
    found = latencies(records)
    if not found:
        return None
    by_suite: dict[str, list[CaseRecord]] = {}
    for record in records:
        by_suite.setdefault(suite_key(record), []).append(record)
    suites = {suite: {**percentiles(values), **clock_figures(rs)}
              for suite, rs in sorted(by_suite.items()) if (values := latencies(rs))}
    return {"clock": clock, **percentiles(found), **clock_figures(records), "suites": suites}
