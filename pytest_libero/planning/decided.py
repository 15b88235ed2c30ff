"""How much of a deciding run is expected to run (``--libero-decide`` with a rate gate).

The decision rule's own simulation: outcome vectors of the selection at a stated true
success rate (each case a success with that probability), each decided by the package's
:class:`~pytest_libero.results.decision.Tracker` in the order the run hands cases out,
exactly as a run decides. The mean share of cases run is the figure; it is an
expectation under that rate, said beside it.
"""

from __future__ import annotations

import random
from collections.abc import Sequence

from pytest_libero.config.decide import DecideSettings, drawn_order, running_order
from pytest_libero.config.plan import Gates
from pytest_libero.results.decision import ANYTIME, DecideSpec, Tracker

RUNS = 200


def expected_fraction(decide: DecideSettings, gates: Gates, native: Sequence[str], mode: str,
                      true_rate: float, runs: int = RUNS, seed: int = 0) -> float | None:
    """The mean share of ``native`` run before the decision; None without a success gate
    to simulate (a baseline or safe-success gate depends on more than one rate)."""
    if gates.min_success is None or gates.baseline is not None or gates.min_safe_success is not None:
        return None
    if not native:
        return 0.0
    rng = random.Random(seed)
    shares = []
    for _ in range(runs):
        order_seed = rng.randrange(2**32)
        order = drawn_order(native, order_seed) if decide.mode == ANYTIME else tuple(native)
        running = running_order(order, native, mode) if decide.mode == ANYTIME else order
        spec = DecideSpec(decide.mode, order, alpha=decide.alpha, order_seed=order_seed,
                          margin=decide.margin, min_success=gates.min_success)
        tracker = Tracker(spec, native)
        ran = 0
        for case in running:
            ran += 1
            outcome = "success" if rng.random() < true_rate else "failure"
            if tracker.add({"case": case, "outcome": outcome}) is not None:  # type: ignore[typeddict-item]
                break
        shares.append(ran / len(native))
    return sum(shares) / runs
