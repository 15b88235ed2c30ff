"""What a run's decision says (``--libero-decide``): its one line, each gate's reason,
the interval on the whole selection's success rate and summary.json's ``decision`` block.

Read from a :class:`~pytest_libero.results.decision.Tracker` (the live run, merge,
verify) or from the block as summary.json holds it (the terminal, the gates).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pytest_libero.config.decide import PROGRESS_SCORE, SUCCESS_SCORE
from pytest_libero.results.betting import interval
from pytest_libero.results.decision import ANYTIME, EXACT, GATE_LABELS, Tracker
from pytest_libero.results.exact import FAIL


def decision_line(block: Mapping[str, Any]) -> str:
    """``decided after 212 of 6,500: FAIL (anytime, alpha 0.05; min-success fail: ...)``
    for a decision as summary.json holds it; an undecided run's says so."""
    how = str(block.get("mode"))
    if how != EXACT and block.get("alpha") is not None:
        how += f", alpha {block['alpha']:g}"
    if block.get("score") == PROGRESS_SCORE:
        how += ", the baseline compared on partial-credit score"
    if not block.get("verdict"):
        return f"not decided early ({how}): the gates judge the cases run"
    said = "; ".join(f"{GATE_LABELS.get(str(g.get('gate')), g.get('gate'))} {g['verdict']}: "
                     f"{gate_reason(g)}" for g in block.get("gates") or [] if g.get("verdict"))
    return (f"decided after {block['decided_after']:,} of {block['of']:,}: "
            f"{str(block['verdict']).upper()} ({how}; {said})")


def gate_reason(gate: Mapping[str, Any]) -> str:
    """What decided one gate, in a few words."""
    stat = gate.get("statistic") or {}
    if gate.get("by") == ANYTIME:
        wealth = stat.get("wealth_fail" if gate.get("verdict") == FAIL else "wealth_pass")
        side = "below" if gate.get("verdict") == FAIL else "at or above"
        what = ("worse than the baseline" if gate.get("gate") == "baseline" and gate.get("verdict") == FAIL
                else "not worse than the baseline by more than the margin"
                if gate.get("gate") == "baseline" else f"the rate is {side} {gate['threshold']:.1%}")
        return f"{what}, wealth {wealth:.3g} >= {stat.get('threshold'):.3g}"
    bound = stat.get("exact") or {}
    if gate.get("gate") == "baseline":
        return (f"McNemar p between {bound.get('p_worst', 0):.3g} and {bound.get('p_best', 0):.3g} "
                "however the cases left end")
    if bound.get("errored"):
        return f"{bound['errored']} errored case(s)"
    what = "successes" if gate.get("gate") == "min_success" else "safe successes"
    return (f"{bound.get('successes', bound.get('safe_successes'))} {what} so far, at most "
            f"{bound.get('possible')} possible, {gate['threshold']:.1%} needed")


def rate_interval(tracker: Tracker) -> dict[str, Any] | None:
    """An interval on the whole selection's success rate: anytime-valid at the run's
    alpha from the drawn order's prefix (anytime mode), within the bounds the finished
    cases make certain; the certain bounds alone in exact mode. None when a case
    errored (the rate of the whole selection is then not its outcomes')."""
    key = (tracker.prefix, len(tracker.finished))
    if tracker.interval_cache is not None and tracker.interval_cache[0] == key:
        return tracker.interval_cache[1]
    found = _rate_interval(tracker)
    tracker.interval_cache = (key, found)
    return found


def _rate_interval(tracker: Tracker) -> dict[str, Any] | None:
    records = tracker.finished
    if any(r["outcome"] == "errored" for r in records.values()):
        return None
    size = len(tracker.selected)
    if size == 0:
        return None
    successes = sum(r["outcome"] == "success" for r in records.values())
    low, high = successes / size, (successes + size - len(records)) / size
    kind = "certain"
    if tracker.spec.mode == ANYTIME and tracker.spec.alpha is not None and tracker.prefix:
        draws = [1.0 if records[c]["outcome"] == "success" else 0.0
                 for c in tracker.spec.order[:tracker.prefix]]
        found = interval(draws, size, tracker.spec.alpha)
        low, high = max(low, found[0]), min(high, found[1])
        kind = f"anytime-valid, level {tracker.spec.alpha:g}"
    return {"low": low, "high": high, "kind": kind, "over": tracker.prefix or len(records)}


def summary_block(tracker: Tracker) -> dict[str, Any]:
    """summary.json's ``decision``: the decision (or, undecided, each gate as it
    stands) with the interval on the whole selection's rate."""
    spec = tracker.spec
    decision = tracker.decision
    block: dict[str, Any] = (decision.as_dict() if decision is not None else {
        "mode": spec.mode, "alpha": spec.alpha, "order_seed": spec.order_seed, "verdict": None,
        "decided_after": None, "of": len(tracker.selected), "prefix": tracker.prefix,
        "gates": list(tracker.state())})
    block["interval"] = rate_interval(tracker)
    if spec.score != SUCCESS_SCORE:
        block["score"] = spec.score
    return block
