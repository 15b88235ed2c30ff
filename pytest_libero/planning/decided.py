"""How much of a deciding run is expected to run (``--libero-decide`` with a rate gate).

The decision rule's own simulation: outcome vectors of the selection at a stated true
success rate (each case a success with that probability), each decided by the package's
:class:`~pytest_libero.results.decision.Tracker` in the order the run hands cases out,
exactly as a run decides. The mean share of cases run is the figure; it is an
expectation under that rate, said beside it. :func:`paired_fraction` does the same for a
run gated by ``--libero-baseline`` alone, each case's outcome drawn given the baseline's
(``plan --detect``: B a stated difference worse, planning/detect.py).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from pytest_libero.config.decide import DecideSettings, drawn_order, running_order
from pytest_libero.config.plan import Gates
from pytest_libero.results.decision import ANYTIME, DecideSpec, Tracker
from pytest_libero.results.exact import FAIL, PASS

UNDECIDED = "undecided"

RUNS = 200


def expected_fraction(decide: DecideSettings, gates: Gates, native: Sequence[str], mode: str,
                      true_rate: float, runs: int = RUNS, seed: int = 0) -> float | None:
    """The mean share of ``native`` run before the decision; None without a success gate
    to simulate (a baseline or safe-success gate depends on more than one rate)."""
    if gates.min_success is None or gates.baseline is not None or gates.min_safe_success is not None:
        return None
    if not native:
        return 0.0
    return _simulate(decide, {"min_success": gates.min_success}, native, mode,
                     lambda case, rng: "success" if rng.random() < true_rate else "failure",
                     runs, seed).share


@dataclass(frozen=True)
class Simulated:
    """What the decision rule did over simulated runs."""

    share: float
    """The mean share of the cases run before the decision (all of them when undecided)."""
    verdicts: dict[str, float]
    """``pass``, ``fail`` and ``undecided``: the share of runs that ended so."""
    runs: int


def paired_fraction(decide: DecideSettings, baseline_alpha: float, baseline: Mapping[str, str],
                    mode: str, chance: Callable[[str, str], float], runs: int = RUNS,
                    seed: int = 0) -> Simulated:
    """A run gated by ``--libero-baseline`` alone, over the cases the baseline completed
    (``baseline``: case -> its outcome, in the selection's order): each case a success
    with ``chance(case, the baseline's outcome)``, decided by the package's Tracker in
    the order the run hands cases out."""
    native = list(baseline)
    return _simulate(decide, {"baseline_alpha": baseline_alpha, "baseline": dict(baseline)}, native,
                     mode, lambda case, rng: "success" if rng.random() < chance(case, baseline[case])
                     else "failure", runs, seed)


def _simulate(decide: DecideSettings, gate: Mapping[str, Any], native: Sequence[str], mode: str,
              outcome: Callable[[str, random.Random], str], runs: int, seed: int) -> Simulated:
    rng = random.Random(seed)
    shares = []
    verdicts = {PASS: 0, FAIL: 0, UNDECIDED: 0}
    for _ in range(runs):
        order_seed = rng.randrange(2**32)
        order = drawn_order(native, order_seed) if decide.mode == ANYTIME else tuple(native)
        running = running_order(order, native, mode) if decide.mode == ANYTIME else order
        spec = DecideSpec(decide.mode, order, alpha=decide.alpha, order_seed=order_seed,
                          margin=decide.margin, **gate)
        tracker = Tracker(spec, native)
        ran, verdict = 0, UNDECIDED
        for case in running:
            ran += 1
            decided = tracker.add({"case": case, "outcome": outcome(case, rng)})  # type: ignore[typeddict-item]
            if decided is not None:
                verdict = decided.verdict
                break
        verdicts[verdict] += 1
        shares.append(ran / len(native) if native else 0.0)
    return Simulated(sum(shares) / runs, {k: v / runs for k, v in verdicts.items()}, runs)
