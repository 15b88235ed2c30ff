"""Verdicts again from a case folder's raw signals, under any thresholds.

The monitor's verdict is a pure function of ``safety.npz`` and the thresholds, so a
reader can check a recorded verdict or ask what stricter limits would have said
without touching a simulator.
"""

from __future__ import annotations

from dataclasses import fields, replace
from pathlib import Path
from typing import Any

from pytest_libero.safety.signals import SIGNALS_NAME, Signals
from pytest_libero.safety.verdict import THRESHOLDS, Thresholds, evaluate


def thresholds_from(overrides: dict[str, float]) -> Thresholds:
    """THRESHOLDS with some values changed; unknown names are refused by name."""
    known = {f.name for f in fields(Thresholds)}
    unknown = sorted(set(overrides) - known)
    if unknown:
        raise ValueError(f"unknown threshold(s) {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    return replace(THRESHOLDS, **overrides)


def recompute(
    case_dir: Path, success: bool, thresholds: Thresholds = THRESHOLDS
) -> tuple[dict[str, Any], str]:
    """(safety, engagement) of one case from its signals file; ``success`` is its
    native outcome (the record's)."""
    signals = Signals.load(case_dir / SIGNALS_NAME)
    return evaluate(signals, success, thresholds)
