"""The ``latency`` kind: every reply becomes usable a fixed number of controls after its
call was sent, on the simulated clock (protocol/clock.py).

Level 1-4 delays each reply by 1, 2, 4 or 8 controls (50, 100, 200 and 400 ms at LIBERO's
20 Hz): meanwhile the robot runs what the previous chunk meant for those moments, or
holds, and the late chunk's head never runs. The world does not wait for the policy, as
a real robot's does not; the simulator still never waits on the wall clock, so the case
replays exactly. The scene and the images are the twin's.
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from pytest_libero.perturb.kind import Context, Kind, KindApplied, Magnitudes, Stage


class LatencyApplied(KindApplied):
    def __init__(self, kind: Kind, level: int, stage: Stage) -> None:
        super().__init__(kind, level, stage)
        drawn = self.draw()
        self.controls = int(drawn.parameters["delay_controls"])
        self.record = drawn.as_dict()

    def delay(self, policy_call: int, latency_s: float) -> int:
        return self.controls


class Latency(Kind):
    name = "latency"
    levels: ClassVar[dict[int, dict[str, float]]] = {
        1: {"delay_controls": 1.0},
        2: {"delay_controls": 2.0},
        3: {"delay_controls": 4.0},
        4: {"delay_controls": 8.0},
    }
    applied = LatencyApplied

    def parameters(self, rng: np.random.Generator, first: np.random.Generator,
                   magnitudes: Magnitudes, context: Context) -> dict[str, Any]:
        return {"delay_controls": int(magnitudes["delay_controls"])}
