"""Episode i of openpi's LIBERO loop, in a fresh environment: the resets before it.

openpi seeds one environment per task once and runs the 50 init states in order, a
native ``reset()`` before each. A reset draws placements from numpy's global random
stream, and it also depends on what the reset before it left in the environment: for
tasks whose fixtures have a placement range (libero_10 task 3), a fresh environment
whose stream is merely set to the right position still draws other placements. A
fresh environment, seeded the same way, that makes the same i native resets first is
the loop's environment before episode i: the episodes in between change nothing a
reset reads (docs/full-mode.md, measured by bench/validate_schedule.py). A soft reset
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


def replay_resets(episodes_before: int, reset: Callable[[], Any]) -> dict[str, Any]:
    """Right after ``env.seed``: make the native resets the loop makes before this
    episode. Returns what the record says about it."""
    for _ in range(episodes_before):
        reset()
    return {
        "mode": "full",
        "positioning_resets": episodes_before,
        "random_state_sha256": random_state_digest(),
    }
