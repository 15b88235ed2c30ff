"""``--libero-decide``: the operator's choice to stop a gated run once its verdict is
settled, and the order its cases run in.

``exact`` keeps the native order. ``anytime`` draws the cases in a seeded, uniformly
random order (its statistics need one, docs/decide.md); a fast-mode run hands them out in
that order. In full mode a case drawn at init state k, built fresh, replays k native
resets first (docs/full-mode.md), so only the order's first part, :data:`RANDOM_PHASE`
of the cases, runs drawn; the rest runs in native order, each task's states in its one
kept environment. The test reads the drawn order only, so which cases its prefixes hold
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
DEFAULT_ALPHA = 0.05
DEFAULT_MARGIN = 0.05
RANDOM_PHASE = 0.1
"""Full mode: the share of the drawn order that runs in that order (then native order)."""


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


def draw_seed() -> int:
    """A seed for a run whose operator gave none (recorded in run.json)."""
    return secrets.randbits(32)


def drawn_order(cases: Sequence[str], seed: int) -> tuple[str, ...]:
    """The cases in a uniformly random order fixed by ``seed`` (Fisher-Yates through
    Python's own generator, the same on every machine and worker)."""
    order = list(cases)
    random.Random(seed).shuffle(order)
    return tuple(order)


def running_order(drawn: Sequence[str], native: Sequence[str], mode: str) -> tuple[str, ...]:
    """The order cases are handed out in: the drawn order in fast mode; in full mode its
    first :data:`RANDOM_PHASE` share, then every other case in native order."""
    if mode != "full":
        return tuple(drawn)
    head = list(drawn[:math.ceil(RANDOM_PHASE * len(drawn))])
    chosen = set(head)
    return (*head, *(c for c in native if c not in chosen))
