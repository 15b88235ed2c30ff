"""CI gates on a run: a minimum success rate, and no significant regression.

The regression gate pairs the cases both runs completed and applies an exact one-sided
McNemar test to the discordant pairs: under "no change" each flip is equally likely
to go either way, so the chance of seeing at least this many success-to-failure flips
out of all flips is a binomial tail with p = 1/2.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from math import comb
from typing import Any

from pytest_libero.summary import COMPLETED


@dataclass
class Verdict:
    """A gate's decision with the lines that explain it."""

    passed: bool
    lines: list[str] = field(default_factory=list)


def min_success_gate(summary: dict[str, Any], threshold: float) -> Verdict:
    """Pass when every selected case completed and the success rate reaches ``threshold``."""
    counts = summary["counts"]
    rate = summary["overall"]["rate"]
    incomplete = counts["errored"] + counts["unattempted"]
    if incomplete:
        return Verdict(False, [
            f"min-success gate FAILED: {counts['errored']} errored and {counts['unattempted']} "
            "unattempted case(s); the evaluation is incomplete, so no rate is certified"
        ])
    if rate is None or rate < threshold:
        shown = "none" if rate is None else f"{rate:.1%}"
        return Verdict(False, [f"min-success gate FAILED: success rate {shown} < {threshold:.1%}"])
    return Verdict(True, [f"min-success gate passed: success rate {rate:.1%} >= {threshold:.1%}"])


def mcnemar_worse_p(worse: int, better: int) -> float:
    """Exact one-sided p-value that ``worse`` flips of ``worse + better`` arise by chance."""
    n = worse + better
    if n == 0:
        return 1.0
    tail: int = sum(comb(n, k) for k in range(worse, n + 1))
    return float(tail / 2**n)


def regression_gate(
    baseline: dict[str, dict[str, Any]], current: dict[str, dict[str, Any]], alpha: float
) -> Verdict:
    """Fail when the current run is significantly worse than the baseline on paired cases."""
    paired = sorted(
        case for case in baseline.keys() & current.keys()
        if baseline[case]["outcome"] in COMPLETED and current[case]["outcome"] in COMPLETED
    )
    lost = [c for c in paired if baseline[c]["outcome"] == "success" and current[c]["outcome"] == "failure"]
    gained = [c for c in paired if baseline[c]["outcome"] == "failure" and current[c]["outcome"] == "success"]
    p = mcnemar_worse_p(len(lost), len(gained))
    worse = p < alpha
    lines = [
        f"baseline gate {'FAILED' if worse else 'passed'}: {len(paired)} paired cases, "
        f"{len(lost)} success->failure, {len(gained)} failure->success, exact McNemar "
        f"one-sided p = {p:.4g} (level {alpha:g})"
    ]
    lines += [f"  lost:   {c}" for c in lost]
    lines += [f"  gained: {c}" for c in gained]
    return Verdict(not worse, lines)
