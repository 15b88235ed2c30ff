"""Re-execute one recorded case in this process and hash what it delivers.

The environment is opened as the record says (entry, init state, track, control cap,
through the run's adapter, so seed and schedule are the adapter's for that mode); each
recorded executed prefix runs at its recorded control index, with the same render
gating as a run. Nothing is compared here: :mod:`pytest_libero.audit.compare` does that.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pytest_libero.adapters import load_adapter
from pytest_libero.adapters.base import Episode
from pytest_libero.catalog.entries import Entry
from pytest_libero.episode.record import CaseRecord
from pytest_libero.evidence.layout import CONTROLS_NAME
from pytest_libero.evidence.reader import ChunkRecord, read_actions
from pytest_libero.goals.progress import ProgressRecord
from pytest_libero.perturb import registry
from pytest_libero.protocol.clock import OPEN_GRIPPER
from pytest_libero.protocol.hashing import array_sha256


@dataclass(frozen=True)
class Delivery:
    """One observation the re-executed episode delivered, as its hashes (and encoders)."""

    call: int
    executed_controls: int
    images: dict[str, str]
    proprio: str | None
    proprio_values: list[float] | None


@dataclass
class Replay:
    """What re-execution produced: every delivery and the native outcome's counters."""

    deliveries: list[Delivery] = field(default_factory=list)
    executed_controls: int = 0
    first_success_control: int | None = None
    first_success_policy_call: int | None = None
    identity: dict[str, object] = field(default_factory=dict)
    controls: list[dict[str, str]] | None = None
    """Evidence level dataset: every control's scene images, camera -> sha256 (0: the
    settled scene); None when the case kept none to compare with."""
    progress: ProgressRecord | None = None
    """Each goal predicate's course in the re-execution (None: the adapter keeps none)."""


@dataclass(frozen=True)
class Schedule:
    """The recorded episode on the simulated clock: which action each control ran (the
    rest held) and how many calls were sent at each control."""

    actions: dict[int, np.ndarray]
    calls_at: dict[int, int]
    controls: int

    @classmethod
    def of(cls, chunks: Iterable[ChunkRecord], recorded_controls: int) -> Schedule:
        """From actions.jsonl: each reply's executed actions at their controls. A record
        written before the clock ran its chunks one after another, from control 0."""
        actions: dict[int, np.ndarray] = {}
        calls_at: dict[int, int] = {}
        running = 0
        for chunk in chunks:
            sent = running if chunk.sent_at_control is None else chunk.sent_at_control
            calls_at[sent] = calls_at.get(sent, 0) + 1
            ran = chunk.executed_actions
            rows = [] if ran is None else list(np.asarray(ran, dtype=np.float64))
            first = sent + (chunk.first_executed_index or 0)
            actions.update({first + i: row for i, row in enumerate(rows)})
            running = max(running, first + len(rows))
        last = max([running, recorded_controls, *calls_at])
        return cls(actions, calls_at, last)


def _deliver(episode: Episode, call: int, control: int) -> Delivery:
    observation = episode.observe(call - 1, control)
    proprio = observation.proprio
    return Delivery(
        call=call,
        executed_controls=control,
        images={camera: array_sha256(image) for camera, image in sorted(observation.images.items())},
        proprio=None if proprio is None else array_sha256(proprio),
        proprio_values=None if proprio is None else [float(v) for v in proprio],
    )


def _scene(episode: Episode, replay: Replay) -> None:
    """Level dataset: the scene's image hashes at this control."""
    if replay.controls is not None:
        images, _ = episode.scene()  # type: ignore[attr-defined]
        replay.controls.append({camera: array_sha256(image) for camera, image in sorted(images.items())})


def entry_of(record: CaseRecord) -> Entry:
    """The catalog entry (and full-mode state) the record ran."""
    return Entry.from_dict(record["entry"])


def replay_case(record: CaseRecord, case_dir: Path, adapter_name: str,
                kinds: Sequence[str] = ()) -> Replay:
    """Open the recorded episode and run its recorded actions; raise on simulator faults.
    ``kinds``: the run's own perturbation kinds, registered here first."""
    registry.load_all(kinds)
    cap = record["budget"]["control_cap"]
    adapter = load_adapter(adapter_name)
    every = (case_dir / CONTROLS_NAME).is_file()  # level dataset: every control's images too
    # A video stride beyond the cap: no frame is rendered for a video nobody writes.
    episode = adapter.open(entry_of(record), track=record["track"], control_cap=cap,
                           render="all" if every else "consumed", video_stride=cap + 1)
    replay = Replay(identity=dict(episode.identity), controls=[] if every else None)
    schedule = Schedule.of(read_actions(case_dir), record["counters"]["executed_controls"])
    try:
        gripper = OPEN_GRIPPER
        _scene(episode, replay)
        for control in range(schedule.controls + 1):
            for _ in range(schedule.calls_at.get(control, 0)):
                replay.deliveries.append(_deliver(episode, len(replay.deliveries) + 1, control))
            if control == schedule.controls:
                break
            action = schedule.actions.get(control)
            if action is None:  # a hold: no motion, the last gripper command
                action = np.zeros(7, dtype=np.float64)
                action[6] = gripper
            gripper = float(action[6])
            done = episode.step(action, control + 1 in schedule.calls_at)
            replay.executed_controls += 1
            _scene(episode, replay)
            if done:
                replay.first_success_control = replay.executed_controls
                replay.first_success_policy_call = len(replay.deliveries)
                return replay
        return replay
    finally:
        replay.progress = getattr(episode, "goal_progress", lambda: None)()
        episode.close()
