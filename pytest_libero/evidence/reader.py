"""Reading a case folder back: every observation checked against its recorded hash,
every action chunk exactly as the policy sent it (and as it ran).

What can be read depends on the folder's evidence level (:func:`evidence_level`):
hashes (:func:`read_observation_hashes`) and actions (:func:`read_actions`) at every
level, the observations themselves (:func:`read_observations`) only at level full."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from pytest_libero.evidence.ffmpeg import FrameReader
from pytest_libero.evidence.layout import (
    ACTIONS_NAME,
    CONTROLS_NAME,
    DATASET,
    FULL,
    INDEX_NAME,
    RECORD_NAME,
    REPLAYABLE,
    STREAMED,
    EvidenceError,
    decode_array,
    stream_name,
)
from pytest_libero.files import read_jsonl
from pytest_libero.protocol.hashing import array_sha256
from pytest_libero.protocol.text import echo


def evidence_level(case_dir: Path | str) -> str:
    """The level a case folder's evidence was written at: ``full``, ``replayable`` or
    ``dataset``.

    Read from what the folder holds: an index line whose images carry stream frame
    numbers (or whose proprio carries its bytes) is full, or dataset beside a
    controls.jsonl; one without is replayable. Before the first observation line, the
    case record (``episode.json``) says; a folder with neither, or one written before
    evidence levels existed, is full.
    """
    folder = Path(case_dir)
    for line in read_jsonl(_require(folder, INDEX_NAME)):
        level = _line_level(line)
        if level == FULL and (folder / CONTROLS_NAME).is_file():
            return DATASET
        if level is not None:
            return level
    try:
        record = json.loads((folder / RECORD_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return FULL
    summary = record.get("evidence") if isinstance(record, dict) else None
    if isinstance(summary, dict) and isinstance(summary.get("level"), str):
        return str(summary["level"])
    if isinstance(record, dict) and isinstance(record.get("evidence_level"), str):
        return str(record["evidence_level"])
    return FULL


def read_observations(
    case_dir: Path | str, *, verify: bool = True
) -> Iterator[tuple[int, dict[str, np.ndarray], np.ndarray | None]]:
    """Yield (call, {camera: image}, proprio) for every stored observation, decoded.

    With ``verify`` each decoded image and proprio vector is checked against the sha256
    recorded when it was delivered; a mismatch raises EvidenceError naming the frame.
    Only a full-level folder keeps the observations: for any other, this raises
    EvidenceError at once, naming the folder and its level
    (:func:`read_observation_hashes` reads what such a folder keeps).
    """
    folder = Path(case_dir)
    level = evidence_level(folder)
    if level not in STREAMED:
        raise EvidenceError(_not_kept(folder, level))
    return _decode(folder, verify)


def _decode(
    folder: Path, verify: bool
) -> Iterator[tuple[int, dict[str, np.ndarray], np.ndarray | None]]:
    readers: dict[str, FrameReader] = {}
    try:
        for line in read_jsonl(folder / INDEX_NAME):
            if _line_level(line) not in (None, FULL):
                raise EvidenceError(_not_kept(folder, REPLAYABLE, f" (call {line['call']})"))
            images = decode_images(folder, line["images"], readers, stream_name,
                                   f"call {line['call']}", verify=verify)
            proprio = None if line["proprio"] is None else decode_array(line["proprio"])
            if verify and proprio is not None and array_sha256(proprio) != line["proprio"]["sha256"]:
                raise EvidenceError(f"{INDEX_NAME}: proprio of call {line['call']} does not match its hash")
            yield int(line["call"]), images, proprio
    finally:
        for reader in readers.values():
            reader.close()


def decode_images(folder: Path, entries: Mapping[str, Any], readers: dict[str, FrameReader],
                  stream: Callable[[str], str], where: str, *, verify: bool = True) -> dict[str, np.ndarray]:
    """One index line's images (camera -> ``frame``, ``shape``, ``sha256``), decoded from
    the camera's lossless stream (``stream(camera)`` names it; ``readers`` keeps one open
    per camera across lines), each checked against its recorded sha256 with ``verify``."""
    images: dict[str, np.ndarray] = {}
    for camera, entry in sorted(entries.items()):
        reader = readers.get(camera)
        if reader is None:
            reader = FrameReader(folder / stream(camera), tuple(entry["shape"]))
            readers[camera] = reader
        image = reader.frame(int(entry["frame"]))
        if verify and array_sha256(image) != entry["sha256"]:
            raise EvidenceError(f"{stream(camera)}: frame {entry['frame']} ({where}) decodes to "
                                f"sha256 {array_sha256(image)}, recorded {entry['sha256']}")
        images[camera] = image
    return images


@dataclass(frozen=True)
class ObservationHashes:
    """One delivered observation as every level keeps it: what identifies it exactly.

    ``images`` maps each camera to the sha256 of its delivered uint8 bytes; ``proprio``
    is the sha256 of the float64 proprio vector (None on the rgb track). Re-executing
    the episode with the stored actions must reproduce every one.
    """

    call: int
    policy_calls: int
    executed_controls: int
    language: str
    images: dict[str, str]
    proprio: str | None


def read_observation_hashes(case_dir: Path | str) -> Iterator[ObservationHashes]:
    """Yield the recorded hashes of every delivered observation, at any evidence level.

    Nothing is decoded: these are the hashes written when each observation was
    delivered (:func:`read_observations` checks a full folder's frames against them).
    """
    for line in read_jsonl(_require(Path(case_dir), INDEX_NAME)):
        proprio = line["proprio"]
        yield ObservationHashes(
            call=int(line["call"]),
            policy_calls=int(line["policy_calls"]),
            executed_controls=int(line["executed_controls"]),
            language=str(line["language"]),
            images={camera: str(entry["sha256"]) for camera, entry in sorted(line["images"].items())},
            proprio=None if proprio is None else str(proprio["sha256"]),
        )


@dataclass(frozen=True)
class ChunkRecord:
    """One reply as stored: the full chunk, how much of it ran, and the stop flag.

    ``complete`` is False for a chunk cut short by an error before the reply was
    recorded; then ``actions`` holds only the controls that executed, and ``stop``
    and ``horizon`` are unknown. ``clipped`` holds the prefix as it executed when it
    differed from the chunk as sent (out_of_bounds = "clip").
    """

    call: int | None
    actions: np.ndarray | None
    horizon: int | None
    executed: int
    stop: bool | None
    complete: bool
    clipped: np.ndarray | None = None
    raw_reply: dict[str, Any] | None = None
    """The server's reply before a transport mapped it (GR00T's action keys): arrays
    exactly, anything else as the text the writer kept."""
    sent_at_control: int | None = None
    """The simulated clock (protocol/clock.py): the control the call was sent at; None
    in a record written before the clock, whose chunks ran one after another."""
    first_executed_index: int | None = None
    """The index of the chunk's first executed action (None: none ran, or an old record)."""
    delay_controls: int = 0

    @property
    def executed_actions(self) -> np.ndarray | None:
        """What the simulator ran: as clipped, or the chunk's actions from the first
        executed one (on an incomplete line, ``actions`` holds only what ran)."""
        if self.clipped is not None:
            return self.clipped
        if self.actions is None:
            return None
        first = 0 if not self.complete else (self.first_executed_index or 0)
        return self.actions[first:first + self.executed]


def read_actions(case_dir: Path | str) -> Iterator[ChunkRecord]:
    """Yield every stored reply, with float64 chunks exactly as the policy sent them.

    Every evidence level keeps the actions exactly."""
    for line in read_jsonl(_require(Path(case_dir), ACTIONS_NAME)):
        actions = None if line["actions"] is None else decode_array(line["actions"])
        if actions is not None and array_sha256(actions) != line["actions"]["sha256"]:
            raise EvidenceError(f"{ACTIONS_NAME}: chunk of call {line['call']} does not match its hash")
        ran = None
        if (clipped := line.get("executed_actions")) is not None:
            ran = decode_array(clipped)
            if array_sha256(ran) != clipped["sha256"]:
                raise EvidenceError(f"{ACTIONS_NAME}: executed prefix of call {line['call']} "
                                    "does not match its hash")
        raw = line.get("raw_reply")
        if raw is not None:
            raw = {k: decode_array(v) if isinstance(v, dict) else v for k, v in raw.items()}
        sent, first, delay = _clock_fields(line)
        yield ChunkRecord(line["call"], actions, line["horizon"], line["executed"],
                          line["stop"], line["complete"], ran, raw, sent, first, delay)


def _clock_fields(line: Mapping[str, Any]) -> tuple[int | None, int | None, int]:
    """A reply's place on the simulated clock, each a count of controls (or absent, in a
    line written before the clock): ``sent_at_control``, ``first_executed_index``,
    ``delay_controls``; ``usable_at_control`` must be the first plus the last."""
    found: dict[str, int | None] = {}
    for key in ("sent_at_control", "first_executed_index", "delay_controls", "usable_at_control"):
        value = line.get(key)
        if value is not None and (type(value) is not int or value < 0):
            raise EvidenceError(f"{ACTIONS_NAME}: call {echo(line.get('call'))}'s {key} is "
                                f"{echo(value)}, not a count of controls")
        found[key] = value
    sent, delay = found["sent_at_control"], found["delay_controls"] or 0
    usable = found["usable_at_control"]
    if usable is not None and (sent is None or usable != sent + delay):
        raise EvidenceError(f"{ACTIONS_NAME}: call {echo(line.get('call'))} is usable at control "
                            f"{usable}, not at its sent_at_control {sent} plus its delay {delay}")
    return sent, found["first_executed_index"], delay


def _require(folder: Path, name: str) -> Path:
    path = folder / name
    if not path.is_file():
        raise EvidenceError(
            f"{folder} has no {name}: not a case evidence folder, or its evidence writer "
            "never started"
        )
    return path


def _line_level(line: Mapping[str, Any]) -> str | None:
    """What one index line shows: full (frames, proprio bytes), replayable, or None."""
    images = line.get("images") or {}
    if images:
        return FULL if all("frame" in entry for entry in images.values()) else REPLAYABLE
    proprio = line.get("proprio")
    if proprio is not None:
        return FULL if "base64" in proprio else REPLAYABLE
    return None


def _not_kept(folder: Path, level: str, where: str = "") -> str:
    return (
        f"{folder}: this case's evidence level is {level!r}, which keeps only the sha256 of "
        f"each observation{where}, not its images or proprio values (no "
        f"observations.<camera>.mkv streams); read_observation_hashes() reads what it keeps. "
        "To keep the observations themselves, run the case with --libero-evidence=full"
    )
