"""The frame rule: which controls of a case become a dataset's frames, and the action of each.

A case folder keeps one observation per policy call, taken at the control the call was
sent at (``observations.jsonl``: ``executed_controls``), and every reply's executed
actions with the controls they ran at (``actions.jsonl``, on the simulated clock of
docs/latency.md). A frame is such an observation paired with the action the robot
executed at that same control: on the synchronous protocol the first executed action of
the call's own reply; when a reply was late, what the clock ran there instead (an
earlier reply's action, or the hold: no motion, the last gripper command). With a replan
interval of 1 every control is a frame; with K > 1 only the decision-time controls are,
since the images between calls are kept only in the lossy ``episode.mp4``. An
observation at whose control nothing ran (the episode ended there) is no frame; of
several observations at one control, the last is.

Nothing here decodes an image: the plan is made from the index and the actions, so a
whole run is checked before anything is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from pytest_libero.evidence.layout import ACTIONS_NAME, INDEX_NAME
from pytest_libero.evidence.reader import ChunkRecord, ObservationHashes
from pytest_libero.protocol.clock import OPEN_GRIPPER


class FrameRuleError(ValueError):
    """The index and the actions of a case do not describe one episode (a damaged folder)."""


@dataclass(frozen=True)
class FramePlan:
    """One frame: the observation of ``call``, at ``control``, and what ran there."""

    call: int
    control: int
    """The control (0 = the first after settling) the observation was taken at: the
    simulated time is ``control / 20`` s."""
    action: np.ndarray
    """float64 (7,): the action executed at ``control``, as executed (after clipping)."""
    held: bool
    """The action is the clock's hold, not a policy action."""
    task: str
    """The instruction the observation carried: what was sent."""


@dataclass(frozen=True)
class _Run:
    """The controls one reply's actions ran at, and those actions."""

    start: int
    ran: np.ndarray
    """(executed, 7): as executed (clipped where clipping changed them)."""
    sent: np.ndarray
    """(executed, 7): as the reply sent them; the hold keeps the last sent gripper."""


def _runs(chunks: Iterable[ChunkRecord]) -> list[_Run]:
    """Each reply's executed actions and the control of the first; replies without a
    clock (records older than it) ran one after another."""
    runs: list[_Run] = []
    sequential = 0
    for chunk in chunks:
        if chunk.executed == 0 or chunk.actions is None:
            continue
        ran = chunk.executed_actions
        first = chunk.first_executed_index or 0
        sent = chunk.actions[first:first + chunk.executed] if chunk.complete else chunk.actions
        if ran is None or ran.shape != (chunk.executed, 7) or sent.shape != ran.shape:
            raise FrameRuleError(f"{ACTIONS_NAME}: call {chunk.call} says {chunk.executed} actions "
                                 f"ran but holds {None if ran is None else list(ran.shape)}")
        if chunk.sent_at_control is None:
            start = sequential
        elif chunk.first_executed_index is None:
            raise FrameRuleError(f"{ACTIONS_NAME}: call {chunk.call} ran actions but names no "
                                 "first executed index")
        else:
            start = chunk.sent_at_control + chunk.first_executed_index
        sequential = start + chunk.executed
        runs.append(_Run(start, ran, sent))
    return runs


def _by_control(runs: Sequence[_Run], controls: int) -> dict[int, tuple[np.ndarray, float]]:
    """Control -> (the action that ran there, the gripper command it leaves)."""
    table: dict[int, tuple[np.ndarray, float]] = {}
    for run in runs:
        for i in range(len(run.ran)):
            control = run.start + i
            if control in table or not 0 <= control < controls:
                raise FrameRuleError(
                    f"{ACTIONS_NAME}: an action runs at control {control}, "
                    + ("which another reply's action also ran at" if control in table
                       else f"outside the episode's {controls} controls"))
            table[control] = (run.ran[i], float(run.sent[i][6]))
    return table


def plan_frames(observations: Sequence[ObservationHashes], chunks: Sequence[ChunkRecord],
                controls: int, held: int | None = None) -> list[FramePlan]:
    """The frames of one case, in order (module docstring: the rule).

    ``controls`` is the record's ``counters.executed_controls``; ``held`` its
    ``held_controls`` when it has them, checked against the actions. Raises
    FrameRuleError when the files cannot be one episode.
    """
    table = _by_control(_runs(chunks), controls)
    if held is not None and controls - len(table) != held:
        raise FrameRuleError(f"{ACTIONS_NAME} runs {len(table)} policy actions over {controls} "
                             f"controls, but the record counts {held} held controls")
    chosen: dict[int, ObservationHashes] = {}
    last = -1
    for seen in observations:
        if seen.executed_controls < last:
            raise FrameRuleError(f"{INDEX_NAME}: call {seen.call} is at control "
                                 f"{seen.executed_controls}, before the call before it")
        last = seen.executed_controls
        if seen.executed_controls < controls:
            chosen[seen.executed_controls] = seen  # the last observation at a control
    frames = []
    gripper = OPEN_GRIPPER
    for control in range(controls):
        found = table.get(control)
        observed = chosen.get(control)
        if observed is not None:
            action = found[0] if found is not None else _hold(gripper)
            frames.append(FramePlan(observed.call, control, np.array(action, dtype=np.float64),
                                    found is None, observed.language))
        if found is not None:
            gripper = found[1]
    return frames


def _hold(gripper: float) -> np.ndarray:
    """The clock's hold (protocol/clock.py): no motion, the last gripper command."""
    hold = np.zeros(7, dtype=np.float64)
    hold[6] = gripper
    return hold
