"""A scripted benchmark adapter for the early-decision runs (no simulator, no rendering):
a case succeeds at its first control when its task index is listed in the environment
variable ``LIBERO_FAKE_SUCCESS`` (comma-separated), and fails natively otherwise; a task
listed in ``LIBERO_FAKE_SLOW`` takes three seconds over its control. With
``LIBERO_FAKE_HELD`` set (even empty) each episode keeps goal progress over a goal of two
predicates: a success holds both, a failure of a task listed there one, any other none.

``--libero-adapter=decide_adapter:Adapter`` with ``--libero-isolation=none`` runs a
case in milliseconds, so whole runs of the plugin (orders, xdist scheduling, the
decision, resume, merge) are tested in seconds.
"""

from __future__ import annotations

import os
import time
from typing import Any

import numpy as np

from pytest_libero.policy.contract import Observation

CAMERAS = ("agentview", "robot0_eye_in_hand")
SUCCESS_VAR = "LIBERO_FAKE_SUCCESS"
SLOW_VAR = "LIBERO_FAKE_SLOW"
HELD_VAR = "LIBERO_FAKE_HELD"


def listed(variable: str) -> set[int]:
    return {int(i) for i in os.environ.get(variable, "").split(",") if i}


class Episode:
    """One scripted episode: tiny black images, success at the first control or never."""

    init_controls = 0

    def __init__(self, entry: Any) -> None:
        self.success = entry.index in listed(SUCCESS_VAR)
        self.slow = entry.index in listed(SLOW_VAR)
        self.progress = HELD_VAR in os.environ
        self.held = 2 if self.success else int(entry.index in listed(HELD_VAR))
        self.controls = 0
        self.identity: dict[str, Any] = {"scripted": True}
        self.image = np.zeros((8, 8, 3), np.uint8)

    def observe(self, policy_calls: int, executed_controls: int) -> Observation:
        return Observation("do it", {c: self.image for c in CAMERAS}, None, policy_calls,
                           executed_controls)

    def frame(self) -> np.ndarray:
        return self.image

    def step(self, action: np.ndarray, observe_next: bool = True) -> bool:
        if self.slow:
            time.sleep(3.0)
        self.controls += 1
        return self.success

    def goal_progress(self) -> dict[str, Any] | None:
        if not self.progress:
            return None
        held = [n < self.held for n in range(2)]
        return {"predicates": ["(In a_1 box_1)", "(In b_1 box_1)"], "held_at_start": [False, False],
                "held_at_end": held, "first_held": [1 if h else None for h in held],
                "most_held": self.held, "controls": self.controls}

    def renders(self) -> dict[str, int] | None:
        return None

    def close(self) -> None:
        pass


class Adapter:
    def open(self, entry: Any, *, track: str, control_cap: int, render: str,
             video_stride: int) -> Episode:
        return Episode(entry)
