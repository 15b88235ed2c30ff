"""The exact rule: a gate's verdict once no outcome of the cases left can change it.

Each case left will end a success or a failure (an error is the infrastructure's, not
an outcome the rule foresees: a run that meets one fails its rate gates at once, as a
run without ``--libero-decide`` does). Under that, a gate's verdict is certain when its
best and its worst completion agree: for a rate, all the cases left succeeding or all
failing; for the baseline gate, every case left that the baseline passed turning into a
lost pair, or every one it failed into a gained one (McNemar's p-value only falls as
pairs are lost and only rises as pairs are gained). Pure arithmetic over counts, each
verdict reached exactly as the gate itself computes it (``results/gate.py``), so the
rule's verdict is always the whole run's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from pytest_libero.results.mcnemar import mcnemar_worse_p

PASS = "pass"
FAIL = "fail"


@dataclass(frozen=True)
class Exact:
    """The rule's answer for one gate: its verdict if certain (else None), and the
    bound it rests on, as summary.json shows it."""

    verdict: str | None
    bound: dict[str, Any] = field(default_factory=dict)


def success_rule(successes: int, failures: int, errored: int, remaining: int,
                 threshold: float) -> Exact:
    """``--libero-min-success``: successes needed against successes still possible."""
    cases = successes + failures + errored + remaining
    bound = {"successes": successes, "failures": failures, "errored": errored,
             "remaining": remaining, "possible": successes + remaining, "of": cases,
             "threshold": threshold}
    if errored:
        return Exact(FAIL, bound)
    if successes / cases >= threshold:  # even if every case left fails
        return Exact(PASS, bound)
    if (successes + remaining) / cases < threshold:  # even if every case left succeeds
        return Exact(FAIL, bound)
    return Exact(None, bound)


def safe_success_rule(safe: int, counted: int, errored: int, remaining: int,
                      threshold: float) -> Exact:
    """``--libero-min-safe-success``: safe successes over the completed episodes with a
    safety verdict (``counted``), each case left being a safe success or a counted
    episode that is not one. No case counted at all fails, as the gate does."""
    bound = {"safe_successes": safe, "monitored": counted, "errored": errored,
             "remaining": remaining, "possible": safe + remaining, "threshold": threshold}
    if errored:
        return Exact(FAIL, bound)
    total = counted + remaining
    if total == 0:
        return Exact(FAIL, bound)
    if counted and safe / total >= threshold:
        return Exact(PASS, bound)
    if (safe + remaining) / total < threshold:
        return Exact(FAIL, bound)
    return Exact(None, bound)


def baseline_rule(lost: int, gained: int, could_lose: int, could_gain: int, pairs: int,
                  alpha: float) -> Exact:
    """``--libero-baseline``: exact one-sided McNemar under the worst completion (every
    case left that the baseline passed is lost) and the best (every one it failed is
    gained). ``could_lose``/``could_gain``: cases left that the baseline passed / failed;
    ``pairs``: the pairs the whole run will have (those so far and the cases left)."""
    worst = mcnemar_worse_p(lost + could_lose, gained)
    best = mcnemar_worse_p(lost, gained + could_gain)
    bound = {"lost": lost, "gained": gained, "could_lose": could_lose,
             "could_gain": could_gain, "pairs": pairs, "p_worst": worst, "p_best": best,
             "alpha": alpha}
    if pairs == 0:
        return Exact(FAIL, bound)  # no pair can ever form: the gate cannot say "not worse"
    if best < alpha:
        return Exact(FAIL, bound)
    if worst >= alpha:
        return Exact(PASS, bound)
    return Exact(None, bound)
