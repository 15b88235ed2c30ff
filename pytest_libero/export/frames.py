"""The frame rule: which controls of a case become a dataset's frames, and the actions of each.

A frame's timestamp is always its simulated time, ``control / 20`` s: every LeRobot
consumer reads time from fps and timestamps (``delta_timestamps``, video decoding, a
policy trained at the control rate). Two layouts keep that true:

* ``every_control`` (a run at ``--libero-evidence=dataset``, which kept both cameras'
  images at every control): one frame per executed control at 20 fps, its action the
  one executed at that control (a chunk's action as it ran, after clipping, or the
  clock's hold: no motion, the last gripper command).
* ``decisions`` (any other run, whose streams keep only the delivered observations):
  one frame per delivered observation at ``20 / K`` fps, its action the K actions
  executed from that control on, shape (K, 7) (holds included; past the episode's end
  padded with the hold, ``actions_ran`` saying how many ran). Only when the decisions
  are evenly K controls apart, from control 0: a late reply, a voluntary stop, the stop
  rule or a reply shorter than K spaces them otherwise, and such a case is refused for
  this layout (:class:`LayoutRefused`) naming ``--libero-evidence=dataset``.

An observation at whose control nothing ran (the episode ended there) is no frame; of
several observations at one control, the last is. Nothing here decodes an image: the
plan is made from the index and the actions, so a whole run is checked before anything
is written.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import numpy as np

from pytest_libero.evidence.layout import ACTIONS_NAME, INDEX_NAME
from pytest_libero.evidence.reader import ChunkRecord, ObservationHashes
from pytest_libero.protocol.clock import OPEN_GRIPPER

EVERY_CONTROL = "every_control"
DECISIONS = "decisions"


class FrameRuleError(ValueError):
    """The index and the actions of a case do not describe one episode (a damaged folder)."""


class LayoutRefused(ValueError):
    """The case's decisions are not evenly K controls apart: decision frames would claim
    times that did not happen."""


@dataclass(frozen=True)
class FramePlan:
    """One frame: the observation at ``control`` (delivered to ``call``, or in the
    every-control layout the latest call sent by then), and what ran from there."""

    call: int
    control: int
    """The control (0 = the first after settling) the observation was taken at: the
    frame's timestamp, ``control / 20`` s."""
    action: np.ndarray
    """float64, as executed (after clipping): (7,) the action at ``control``
    (every_control), or (K, 7) the K actions from ``control`` on (decisions)."""
    held: int
    """How many of those actions are the clock's hold, not a policy action."""
    task: str
    """The instruction the latest delivered observation carried: what was sent."""
    ran: int = 1
    """How many of the frame's actions ran (decisions: fewer than K at the episode's end)."""


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
                controls: int, held: int | None = None, *, layout: str = EVERY_CONTROL,
                interval: int = 1) -> list[FramePlan]:
    """The frames of one case, in order (module docstring: the rule), in ``layout``
    with replan interval ``interval`` (K, for the decisions layout).

    ``controls`` is the record's ``counters.executed_controls``; ``held`` its
    ``held_controls`` when it has them, checked against the actions. Raises
    FrameRuleError when the files cannot be one episode, LayoutRefused when the
    decisions are not evenly K apart for the decisions layout.
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
    executed = _executed(table, controls)
    if layout == DECISIONS:
        return _decision_frames(chosen, executed, controls, interval)
    frames = []
    latest: ObservationHashes | None = None
    for control in range(controls):
        latest = chosen.get(control, latest)
        if latest is None:
            raise FrameRuleError(f"{INDEX_NAME}: no observation was delivered at control 0")
        frames.append(FramePlan(latest.call, control, executed.actions[control],
                                int(executed.holds[control]), latest.language))
    return frames


@dataclass(frozen=True)
class _Executed:
    """What ran at each control of an episode."""

    actions: list[np.ndarray]
    """The executed action, or the hold where none ran."""
    holds: list[bool]
    gripper: float
    """The gripper command in force after the last control (as sent): what a hold keeps."""


def _executed(table: dict[int, tuple[np.ndarray, float]], controls: int) -> _Executed:
    """Each control's executed action (the hold where none ran) and whether it was a hold."""
    actions, holds = [], []
    gripper = OPEN_GRIPPER
    for control in range(controls):
        found = table.get(control)
        actions.append(np.array(found[0] if found is not None else _hold(gripper), dtype=np.float64))
        holds.append(found is None)
        if found is not None:
            gripper = found[1]
    return _Executed(actions, holds, gripper)


def _decision_frames(chosen: dict[int, ObservationHashes], executed: _Executed, controls: int,
                     interval: int) -> list[FramePlan]:
    """One frame per delivered observation, each K controls after the last, with the K
    actions executed from it on; LayoutRefused when the spacing is not exactly K."""
    at = sorted(chosen)
    for number, control in enumerate(at):
        if control != number * interval:
            shown = ", ".join(map(str, at[:8])) + (" ..." if len(at) > 8 else "")
            raise LayoutRefused(f"its observations were delivered at controls {shown}, not every "
                                f"{interval} controls from 0 (late replies, a voluntary stop, the "
                                "stop rule or replies shorter than K space them otherwise)")
    frames = []
    for control in at:
        span = range(control, min(control + interval, controls))
        actions = [executed.actions[c] for c in span]
        actions += [_hold(executed.gripper)] * (interval - len(actions))  # past the episode's end
        seen = chosen[control]
        frames.append(FramePlan(seen.call, control, np.stack(actions),
                                sum(executed.holds[c] for c in span), seen.language, ran=len(span)))
    return frames


def _hold(gripper: float) -> np.ndarray:
    """The clock's hold (protocol/clock.py): no motion, the last gripper command."""
    hold = np.zeros(7, dtype=np.float64)
    hold[6] = gripper
    return hold
