"""Compare a re-executed episode with its record: the first difference, both values.

Images are compared only when the run and the check render with the same renderer
(``rendering``: Mesa on a CPU and a GPU's EGL differ in the last bits). Encoders do not
depend on rendering: equal hashes on one machine; across CPU kinds they agree to about 1e-15,
so where the record kept their values (evidence level full) a difference up to
``ENCODER_TOLERANCE`` is accepted and noted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from pytest_libero.audit.agreement import bounded
from pytest_libero.audit.replay import Replay
from pytest_libero.episode.record import CaseRecord
from pytest_libero.evidence.reader import ObservationHashes
from pytest_libero.protocol.text import clipped

ENCODER_TOLERANCE = 1e-9
"""Largest encoder difference (rad, or m for the gripper) accepted as the same value."""

PROGRESS_COMPARED = ("predicates", "held_at_start", "held_at_end", "first_held", "most_held")
"""What of a record's ``progress`` the re-execution must reproduce."""

VERIFIED = "verified"
MISMATCH = "mismatch"
NOT_VERIFIABLE = "not_verifiable"


@dataclass
class Verdict:
    """One case's result: verified, mismatch (the first difference) or not verifiable."""

    case: str
    status: str
    reason: str
    difference: dict[str, Any] | None = None
    checked: dict[str, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.reason = clipped(self.reason)  # it can echo what a record or a child said

    def as_dict(self) -> dict[str, Any]:
        return {"case": self.case, "status": self.status, "reason": self.reason,
                "difference": self.difference, "checked": self.checked}


def compare(
    record: CaseRecord,
    recorded: Sequence[ObservationHashes],
    recorded_proprio: Sequence[list[float] | None],
    replay: Replay,
    *,
    images: bool,
    recorded_controls: Sequence[dict[str, str]] | None = None,
) -> Verdict:
    """The verdict for one case; ``images`` says whether image hashes are comparable.
    ``recorded_controls``: every control's image hashes (evidence level dataset)."""
    case = record["case"]
    notes: list[str] = []
    checked: dict[str, Any] = {"deliveries": len(recorded), "controls": replay.executed_controls,
                               "images_compared": images}
    drawn = replay.identity.get("perturbation")
    if record.get("perturbation") != drawn:  # the re-execution draws it again from the case
        return _mismatch(case, {"perturbation": True}, "perturbation", record.get("perturbation"),
                         drawn, checked)
    for shown, done, values in zip(recorded, replay.deliveries, recorded_proprio):
        where = {"call": shown.call, "executed_controls": shown.executed_controls}
        if shown.executed_controls != done.executed_controls:
            return _mismatch(case, where, "executed_controls", shown.executed_controls,
                             done.executed_controls, checked)
        if images:
            for camera, digest in shown.images.items():
                if done.images.get(camera) != digest:
                    return _mismatch(case, where, camera, digest, done.images.get(camera), checked)
        if shown.proprio != done.proprio:
            gap = _encoder_gap(values, done.proprio_values)
            if gap is None or gap > ENCODER_TOLERANCE:
                return _mismatch(case, where, "proprio", shown.proprio, done.proprio, checked,
                                 note=None if gap is None else f"max |difference| {gap:.3g}")
            notes.append(f"call {shown.call}: encoders within {gap:.2g} of the record")
    if len(recorded) != len(replay.deliveries):
        return _mismatch(case, {"call": min(len(recorded), len(replay.deliveries)) + 1},
                         "deliveries", len(recorded), len(replay.deliveries), checked)
    if recorded_controls is not None:
        differs = _controls_difference(case, recorded_controls, replay, images, checked)
        if differs is not None:
            return differs
    counters = record["counters"]
    for name, value in (("executed_controls", replay.executed_controls),
                        ("first_success_control", replay.first_success_control),
                        ("first_success_policy_call", replay.first_success_policy_call)):
        if counters[name] != value:  # type: ignore[literal-required]
            return _mismatch(case, {"counter": name}, name, counters[name],  # type: ignore[literal-required]
                             value, checked)
    native = "success" if replay.first_success_control is not None else "failure"
    if record["outcome"] != "errored" and record["outcome"] != native:
        return _mismatch(case, {"outcome": True}, "outcome", record["outcome"], native, checked)
    progress = record.get("progress")
    if record["outcome"] != "errored" and progress is not None and replay.progress is not None:
        for name in PROGRESS_COMPARED:
            if progress.get(name) != replay.progress.get(name):
                return _mismatch(case, {"progress": name}, f"progress.{name}", progress.get(name),
                                 replay.progress.get(name), checked)
        checked["progress_compared"] = True
    reason = f"{len(recorded)} deliveries and {replay.executed_controls} controls re-executed"
    if recorded_controls is not None:
        reason += f", every control's images {'compared' if images else 'counted'}"
    reason += ", outcome " + (native if record["outcome"] != "errored" else "errored (prefix only)")
    if not images:
        reason += "; images not compared"
    if notes:
        checked["tolerance_notes"] = notes
    return Verdict(case, VERIFIED, reason, None, checked)


def _controls_difference(case: str, recorded: Sequence[dict[str, str]], replay: Replay,
                         images: bool, checked: dict[str, Any]) -> Verdict | None:
    """Level dataset: every control's images as kept, against the re-executed scene."""
    done = replay.controls or []
    checked["control_images"] = len(recorded)
    if len(recorded) != len(done):
        return _mismatch(case, {"control": min(len(recorded), len(done))}, "control images",
                         len(recorded), len(done), checked)
    if images:
        for control, (kept, again) in enumerate(zip(recorded, done)):
            for camera, digest in kept.items():
                if again.get(camera) != digest:
                    return _mismatch(case, {"control": control}, f"{camera} (every-control image)",
                                     digest, again.get(camera), checked)
    return None


def _encoder_gap(recorded: list[float] | None, replayed: list[float] | None) -> float | None:
    if recorded is None or replayed is None or len(recorded) != len(replayed):
        return None
    return max((abs(a - b) for a, b in zip(recorded, replayed)), default=0.0)


def _mismatch(case: str, where: dict[str, Any], what: str, recorded: Any, replayed: Any,
              checked: dict[str, Any], note: str | None = None) -> Verdict:
    place = ", ".join(f"{k} {v}" for k, v in where.items() if v is not True)
    reason = f"{what} differs" + (f" at {place}" if place else "")
    recorded, replayed = bounded(recorded), bounded(replayed)
    reason += (f": recorded {clipped(str(recorded), 300)}, re-executed {clipped(str(replayed), 300)}"
               + (f" ({note})" if note else ""))
    difference = {**where, "field": what, "recorded": recorded, "replayed": replayed}
    return Verdict(case, MISMATCH, reason, difference, checked)
