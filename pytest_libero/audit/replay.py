"""Re-execute one recorded case in this process and hash what it delivers.

The environment is opened as the record says (entry, init state, track, control cap,
through the run's adapter, so seed and schedule are the adapter's for that mode); each
recorded executed prefix runs at its recorded control index, with the same render
gating as a run. Nothing is compared here: :mod:`pytest_libero.audit.compare` does that.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from pytest_libero.adapters import load_adapter
from pytest_libero.catalog.entries import Entry
from pytest_libero.episode.record import CaseRecord
from pytest_libero.evidence.reader import read_actions
from pytest_libero.perturb import registry
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
    # A video stride beyond the cap: no frame is rendered for a video nobody writes.
    episode = adapter.open(entry_of(record), track=record["track"], control_cap=cap,
                           render="consumed", video_stride=cap + 1)
    replay = Replay(identity=dict(episode.identity))
    try:
        for call, chunk in enumerate(read_actions(case_dir), start=1):
            observation = episode.observe(call - 1, replay.executed_controls)
            proprio = observation.proprio
            replay.deliveries.append(Delivery(
                call=call,
                executed_controls=replay.executed_controls,
                images={camera: array_sha256(image) for camera, image in sorted(observation.images.items())},
                proprio=None if proprio is None else array_sha256(proprio),
                proprio_values=None if proprio is None else [float(v) for v in proprio],
            ))
            executed = chunk.executed_actions
            prefix = [] if executed is None else list(np.asarray(executed, dtype=np.float64))
            for n, action in enumerate(prefix, start=1):
                done = episode.step(action, n == len(prefix))
                replay.executed_controls += 1
                if done:
                    replay.first_success_control = replay.executed_controls
                    replay.first_success_policy_call = call
                    return replay
        return replay
    finally:
        episode.close()
