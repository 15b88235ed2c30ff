"""``--libero-decide``: the operator's choice to stop a gated run once its verdict is
settled, and the order its cases run in.

``exact`` keeps the native order. ``anytime`` draws the cases in a seeded, uniformly
random order (its statistics need one, docs/decide.md); a fast-mode run hands them out in
that order. In full mode a case drawn at init state k, built fresh, replays k native
resets first (docs/full-mode.md), so only the order's first part (:func:`random_head`: 5% of
the cases, at least 200) runs drawn; the rest runs in native order, each task's states in
its one kept environment. The test reads the drawn order only, so which cases its prefixes hold
is unchanged: the running order decides when they finish, never what they say.

These are operator settings: nothing here enters a protocol identity.
"""

from __future__ import annotations

import math
import random
import secrets
from collections.abc import Sequence
from dataclasses import dataclass

DECIDE_MODES = ("exact", "anytime")
SUCCESS_SCORE = "success"
PROGRESS_SCORE = "progress"
DECIDE_SCORES = (SUCCESS_SCORE, PROGRESS_SCORE)
"""What the baseline's betting test compares per case (``--libero-decide-score``): the
outcome, or the partial-credit score (docs/records.md, *Progress and score*)."""
DEFAULT_ALPHA = 0.05
DEFAULT_MARGIN = 0.05
RANDOM_PHASE = 0.05
"""Full mode: the share of the drawn order that runs in that order (then native order);
bench/decide_early.py measured 5% against 10-100% (docs/decide.md)."""
RANDOM_PHASE_LEAST = 200
"""... but at least this many cases (a small selection's decisions need them)."""


@dataclass(frozen=True)
class DecideSettings:
    """What ``--libero-decide`` and its companions asked for, checked."""

    mode: str
    alpha: float | None = None
    """anytime only: the level of the betting test (``--libero-alpha``)."""
    order_seed: int | None = None
    """anytime only: the order's seed (``--libero-order-seed``); None: drawn at the run's
    start and recorded."""
    margin: float = DEFAULT_MARGIN
    """anytime with a baseline: "not worse by more than" this (``--libero-baseline-margin``)."""
    score: str = SUCCESS_SCORE
    """anytime with a baseline: what its betting test compares (``--libero-decide-score``)."""


def draw_seed() -> int:
    """A seed for a run whose operator gave none (recorded in run.json)."""
    return secrets.randbits(32)


def drawn_order(cases: Sequence[str], seed: int) -> tuple[str, ...]:
    """The cases in a uniformly random order fixed by ``seed`` (Fisher-Yates through
    Python's own generator, the same on every machine and worker)."""
    order = list(cases)
    random.Random(seed).shuffle(order)
    return tuple(order)


def random_head(cases: int) -> int:
    """How many of the drawn order's cases a full-mode run hands out in that order."""
    return min(cases, max(math.ceil(RANDOM_PHASE * cases), RANDOM_PHASE_LEAST))


def running_order(drawn: Sequence[str], native: Sequence[str], mode: str) -> tuple[str, ...]:
    """The order cases are handed out in: the drawn order in fast mode; in full mode its
    first :func:`random_head` cases, then every other case in native order."""
    if mode != "full":
        return tuple(drawn)
    head = list(drawn[:random_head(len(drawn))])
    chosen = set(head)
    return (*head, *(c for c in native if c not in chosen))
