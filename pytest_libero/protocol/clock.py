"""The simulated clock: which action each control executes when a reply is late.

The simulator never waits on the wall clock; time is counted in controls of the 20 Hz
controller. Call n is sent at control t_n with that control's observation, and its reply
becomes usable at a_n = t_n + d_n, d_n being the call's delay in controls. At control c
the robot executes ``chunk_n[c - t_n]`` of the latest chunk with a_n <= c: what that
chunk meant for that moment. Where there is none yet, or the index passes the chunk's
end, it holds: no motion, the last gripper command. The head ``chunk_n[0 .. d_n - 1]``
is stale and never executed. One call is in flight at a time: t_{n+1} = max(t_n + s_n,
a_n), where s_n = min(K, H_n) is what the synchronous protocol executes of an H_n-action
chunk under replan interval K (0 for a reply without actions). With every d_n = 0 this
is the synchronous protocol, control for control (docs/latency.md).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Final

import numpy as np

SYNCHRONOUS: Final = "synchronous"
"""The world waits for every reply: each is usable at once (every delay 0)."""
REALTIME: Final = "realtime"
"""Each reply is usable after its own measured latency (:func:`measured_delay`)."""
CONTROL_PERIOD_S: Final = 0.05
"""One control of LIBERO's 20 Hz controller, in seconds: the clock's tick."""
OPEN_GRIPPER: Final = -1.0
"""The gripper command the settling controls leave (P4): what a hold keeps at first."""


def realtime_parameters() -> dict[str, object]:
    """What defines the realtime track beside the protocol: hashed into its identity."""
    return {"control_period_s": CONTROL_PERIOD_S, "delay": "ceil(latency / control period), at least 1",
            "in_flight": 1, "hold": "no motion, the last gripper command",
            "gripper_before_the_first_reply": OPEN_GRIPPER}


def measured_delay(latency_s: float) -> int:
    """The realtime track's delay of a call: its latency in controls, rounded up, at least 1."""
    return max(1, math.ceil(latency_s / CONTROL_PERIOD_S - 1e-9))


@dataclass
class ChunkTiming:
    """When one reply was sent and usable, and which of its actions ran."""

    call: int
    sent_at: int
    """t_n: the control whose observation the call carried."""
    delay: int
    """d_n, in controls."""
    latency_s: float
    """Wall seconds around the call, as the evaluator saw it."""
    horizon: int
    """H_n: the reply's actions (0 for a reply without any)."""
    first_executed: int | None = None
    """The chunk index of its first executed action (None: none ran)."""
    executed: int = 0
    """How many of its actions ran, from ``first_executed`` on, one control each."""

    @property
    def usable_at(self) -> int:
        return self.sent_at + self.delay

    @property
    def stale(self) -> int:
        """The head that arrived too late to run: ``chunk[0 .. d - 1]``."""
        return min(self.delay, self.horizon)


class Clock:
    """One episode's clock: the call in flight, the latest usable chunk, and each
    control's action. Chunks are handed back, in call order, once nothing more of them
    can run (:meth:`finished`)."""

    def __init__(self, replan_interval: int) -> None:
        self.replan_interval = replan_interval
        self.gripper = OPEN_GRIPPER
        self.held = 0
        self._latest: tuple[ChunkTiming, np.ndarray] | None = None
        self._flight: tuple[ChunkTiming, np.ndarray | None] | None = None
        self._open: list[ChunkTiming] = []
        self._done: set[int] = set()

    def send(self, timing: ChunkTiming, actions: np.ndarray | None) -> None:
        """Call ``timing.call`` was answered with ``actions``; it is usable from its
        ``usable_at``. The previous call is usable by now (one in flight at a time)."""
        assert self._flight is None or self._flight[0].usable_at <= timing.sent_at
        self._arrive(timing.sent_at)
        self._flight = (timing, actions)
        self._open.append(timing)

    def next_call_at(self) -> int:
        """t_{n+1}: when the next call is due after the last one sent."""
        assert self._flight is not None
        timing = self._flight[0]
        return max(timing.sent_at + min(self.replan_interval, timing.horizon), timing.usable_at)

    def action(self, control: int) -> tuple[np.ndarray, ChunkTiming | None]:
        """The action of ``control`` (numbered from 0 after settling) and the chunk it
        comes from; None for a hold."""
        self._arrive(control)
        if self._latest is not None:
            timing, actions = self._latest
            index = control - timing.sent_at
            if index < timing.horizon:
                if timing.first_executed is None:
                    timing.first_executed = index
                timing.executed += 1
                self.gripper = float(actions[index][6])
                return actions[index], timing
            self._retire(timing)
        self.held += 1
        hold = np.zeros(7, dtype=np.float64)
        hold[6] = self.gripper
        return hold, None

    def finished(self, *, everything: bool = False) -> list[ChunkTiming]:
        """The chunks nothing more of can run, in call order, each handed back once;
        ``everything`` at the episode's end."""
        done: list[ChunkTiming] = []
        while self._open and (everything or self._open[0].call in self._done):
            done.append(self._open.pop(0))
        return done

    def _arrive(self, control: int) -> None:
        """Make the call in flight usable once ``control`` reaches its ``usable_at``."""
        if self._flight is None or self._flight[0].usable_at > control:
            return
        timing, actions = self._flight
        self._flight = None
        if actions is None or timing.horizon == 0:
            self._retire(timing)
            return
        if self._latest is not None:
            self._retire(self._latest[0])
        self._latest = (timing, actions)

    def _retire(self, timing: ChunkTiming) -> None:
        self._done.add(timing.call)
        if self._latest is not None and self._latest[0] is timing:
            self._latest = None
