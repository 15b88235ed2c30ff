"""Evidence level ``dataset``: both cameras' images at every control, not only the delivered ones.

A dataset with one frame per control needs the images the policy was not sent: with a
replan interval K > 1 the observations between calls exist only in the simulator. At
this level the case renders every camera at every control (``render="all"``: the same
bytes as skipped renders leave, docs/performance.md) and :class:`ControlFrames` keeps
each control's images losslessly, in streams of their own (``controls.<camera>.mkv``,
the same codecs as the delivered ones) with one line per control in ``controls.jsonl``:
the control (0: the settled scene, before the first action; c: after c actions), and
each image's sha256 and frame. Nothing the policy is sent or the episode does changes.

The images are the simulator's, rotated as delivered; a perturbation that changes only
what is delivered (the ``noise`` kind) is in the delivered observations, not here.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import IO, Any

import numpy as np

from pytest_libero.evidence.ffmpeg import LOSSLESS_CODECS, FrameReader, FrameWriter, camera_codec
from pytest_libero.evidence.layout import (
    CAMERA_NAME,
    CONTROLS_NAME,
    EvidenceError,
    control_stream_name,
    decode_array,
    encode_array,
)
from pytest_libero.evidence.reader import decode_images
from pytest_libero.files import json_text, read_jsonl
from pytest_libero.protocol.hashing import array_sha256

Scene = Callable[[], tuple[Mapping[str, np.ndarray], np.ndarray | None]]
"""The episode's camera images after the last control, and its proprio vector on the
rgb+proprio track (None on rgb): ``Episode.scene``."""


class ControlFrames:
    """Writes every control's images of one case (opened by ``CaseEvidence`` at level
    dataset); :meth:`follow` is handed the episode's scene before its first control."""

    def __init__(self, folder: Path, fps: int, reaper: list[subprocess.Popen[bytes]]) -> None:
        self.folder, self.fps, self._reaper = folder, fps, reaper
        self._index: IO[str] = (folder / CONTROLS_NAME).open("x", encoding="utf-8")
        self._streams: dict[str, FrameWriter] = {}
        self._scene: Scene | None = None
        self.controls = 0

    def follow(self, scene: Scene) -> None:
        """The episode to take images from; its settled scene is control 0."""
        self._scene = scene
        self.take(0)

    def take(self, control: int) -> None:
        """The scene's images after ``control`` controls, kept."""
        if self._scene is None:
            raise EvidenceError(f"{self.folder}: evidence level dataset keeps every control's "
                                "images, but the episode's scene was never handed to it")
        scene, proprio = self._scene()
        images: dict[str, Any] = {}
        for camera, image in sorted(scene.items()):
            if not CAMERA_NAME.match(camera):
                raise EvidenceError(f"camera name {camera!r} cannot name a file")
            if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
                raise EvidenceError(f"the scene's {camera!r} image is {image.dtype}{list(image.shape)}; "
                                    "only uint8 (H, W, 3) RGB is stored")
            images[camera] = {"sha256": array_sha256(image), "shape": list(image.shape),
                              "frame": self._stream(camera, image).write(image)}
        line = {"control": control, "images": images,
                "proprio": None if proprio is None else encode_array(proprio)}
        self._index.write(json_text(line, separators=(",", ":")) + "\n")
        self._index.flush()
        self.controls = control + 1

    def writers(self) -> list[FrameWriter]:
        return list(self._streams.values())

    def files(self) -> list[str]:
        return [CONTROLS_NAME, *(control_stream_name(c) for c in self._streams)]

    def close(self) -> None:
        if not self._index.closed:
            self._index.close()

    def describe(self) -> dict[str, Any]:
        return {"index": CONTROLS_NAME, "count": self.controls,
                "streams": {camera: {"path": control_stream_name(camera), "frames": w.frames,
                                     "codec": camera_codec(camera)}
                            for camera, w in sorted(self._streams.items())}}

    def _stream(self, camera: str, image: np.ndarray) -> FrameWriter:
        stream = self._streams.get(camera)
        if stream is None:
            stream = FrameWriter(self.folder / control_stream_name(camera), image.shape,
                                 LOSSLESS_CODECS[camera_codec(camera)], self.fps, self._reaper)
            self._streams[camera] = stream
        return stream


def read_control_hashes(case_dir: Path | str) -> list[dict[str, str]] | None:
    """Each kept control's image hashes, camera -> sha256, in control order (nothing is
    decoded); None for a case folder that kept no control images (not level dataset)."""
    folder = Path(case_dir)
    if not (folder / CONTROLS_NAME).is_file():
        return None
    found = []
    for n, line in enumerate(read_jsonl(folder / CONTROLS_NAME)):
        if line.get("control") != n:
            raise EvidenceError(f"{CONTROLS_NAME}: line {n + 1} is control {line.get('control')!r}, "
                                f"not {n}")
        found.append({camera: str(entry["sha256"]) for camera, entry in sorted(line["images"].items())})
    return found


def read_control_frames(
    case_dir: Path | str,
) -> Iterator[tuple[int, dict[str, np.ndarray], np.ndarray | None]]:
    """Yield (control, {camera: image}, proprio) for every control a dataset-level case
    kept, decoded and each checked against its recorded sha256 (EvidenceError otherwise)."""
    folder = Path(case_dir)
    if not (folder / CONTROLS_NAME).is_file():
        raise EvidenceError(f"{folder} has no {CONTROLS_NAME}: its case was not run at evidence "
                            "level dataset (--libero-evidence=dataset keeps every control's images)")
    readers: dict[str, FrameReader] = {}
    try:
        for line in read_jsonl(folder / CONTROLS_NAME):
            images = decode_images(folder, line["images"], readers, control_stream_name,
                                   f"control {line['control']}")
            proprio = None if line.get("proprio") is None else decode_array(line["proprio"])
            if proprio is not None and array_sha256(proprio) != line["proprio"]["sha256"]:
                raise EvidenceError(f"{CONTROLS_NAME}: the proprio of control {line['control']} "
                                    "does not match its hash")
            yield int(line["control"]), images, proprio
    finally:
        for reader in readers.values():
            reader.close()
