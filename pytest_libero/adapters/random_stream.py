"""Episode i of openpi's LIBERO loop: the native resets before it.

openpi seeds one environment per task once and runs the 50 init states in order, a
native ``reset()`` before each. A reset draws placements from numpy's global random
stream, and it also depends on what the reset before it left in the environment: for
tasks whose fixtures have a placement range (libero_10 task 3), a fresh environment
whose stream is merely set to the right position still draws other placements. A
fresh environment, seeded the same way, that makes the same i native resets first is
the loop's environment before episode i: the episodes in between change nothing a
reset reads (docs/full-mode.md, measured by release/validate_schedule.py), so the task's
environment kept after an earlier state's episode continues with only the resets in
between, as the loop itself does. A soft reset
(robosuite's ``hard_reset`` off) is no substitute either: it keeps the model the last
reset moved and draws differently.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from pytest_libero.protocol.hashing import sha256_bytes

RandomState = tuple[str, np.ndarray, int, int, float]


def random_state_digest(state: RandomState | None = None) -> str:
    """sha256 of numpy's global random state (now, or ``state``)."""
    name, key, pos, has_gauss, cached = state or np.random.get_state(legacy=True)
    return sha256_bytes(f"{name}:{pos}:{has_gauss}:{cached!r}:".encode() + np.asarray(key).tobytes())


def replay_resets(
    episodes_before: int, reset: Callable[[], Any], *, made: int = 0, kept_from: int | None = None
) -> dict[str, Any]:
    """Make the native resets the loop makes before this episode, of which ``made``
    were already made: 0 right after ``env.seed``; in the task's environment kept from
    state ``kept_from``, the resets of the episodes it already ran. Returns what the
    record says about it: the same random state either way."""
    if made > episodes_before:
        raise ValueError(f"{made} resets already made, but the episode needs {episodes_before}")
    for _ in range(episodes_before - made):
        reset()
    return {
        "mode": "full",
        "positioning_resets": episodes_before,
        "environment": "fresh" if kept_from is None else f"kept from state {kept_from}",
        "resets_made_here": episodes_before - made,
        "random_state_sha256": random_state_digest(),
    }
