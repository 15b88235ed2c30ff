"""Reading a case folder back: every observation checked against its recorded hash,
every action chunk exactly as the policy sent it (and as it ran)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pytest_libero.evidence.ffmpeg import FrameReader
from pytest_libero.evidence.layout import ACTIONS_NAME, INDEX_NAME, EvidenceError, decode_array, stream_name
from pytest_libero.files import read_jsonl
from pytest_libero.protocol.hashing import array_sha256


def read_observations(
    case_dir: Path | str, *, verify: bool = True
) -> Iterator[tuple[int, dict[str, np.ndarray], np.ndarray | None]]:
    """Yield (call, {camera: image}, proprio) for every stored observation, decoded.

    With ``verify`` each decoded image and proprio vector is checked against the sha256
    recorded when it was delivered; a mismatch raises EvidenceError naming the frame.
    """
    folder = Path(case_dir)
    readers: dict[str, FrameReader] = {}
    try:
        for line in read_jsonl(folder / INDEX_NAME):
            images: dict[str, np.ndarray] = {}
            for camera, entry in sorted(line["images"].items()):
                reader = readers.get(camera)
                if reader is None:
                    reader = FrameReader(folder / stream_name(camera), tuple(entry["shape"]))
                    readers[camera] = reader
                image = reader.frame(int(entry["frame"]))
                if verify and array_sha256(image) != entry["sha256"]:
                    raise EvidenceError(
                        f"{stream_name(camera)}: frame {entry['frame']} (call {line['call']}) "
                        f"decodes to sha256 {array_sha256(image)}, recorded {entry['sha256']}"
                    )
                images[camera] = image
            proprio = None if line["proprio"] is None else decode_array(line["proprio"])
            if verify and proprio is not None and array_sha256(proprio) != line["proprio"]["sha256"]:
                raise EvidenceError(f"{INDEX_NAME}: proprio of call {line['call']} does not match its hash")
            yield int(line["call"]), images, proprio
    finally:
        for reader in readers.values():
            reader.close()


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

    @property
    def executed_actions(self) -> np.ndarray | None:
        """What the simulator ran: the clipped prefix, or the chunk's first actions."""
        if self.clipped is not None:
            return self.clipped
        return None if self.actions is None else self.actions[: self.executed]


def read_actions(case_dir: Path | str) -> Iterator[ChunkRecord]:
    """Yield every stored reply, with float64 chunks exactly as the policy sent them."""
    for line in read_jsonl(Path(case_dir) / ACTIONS_NAME):
        actions = None if line["actions"] is None else decode_array(line["actions"])
        if actions is not None and array_sha256(actions) != line["actions"]["sha256"]:
            raise EvidenceError(f"{ACTIONS_NAME}: chunk of call {line['call']} does not match its hash")
        ran = None
        if (clipped := line.get("executed_actions")) is not None:
            ran = decode_array(clipped)
            if array_sha256(ran) != clipped["sha256"]:
                raise EvidenceError(f"{ACTIONS_NAME}: executed prefix of call {line['call']} "
                                    "does not match its hash")
        yield ChunkRecord(line["call"], actions, line["horizon"], line["executed"],
                          line["stop"], line["complete"], ran)
