"""The case folder's names and its exact JSON form of arrays.

Shared by the writer and the reader so both agree on every file name and byte.
"""

from __future__ import annotations

import base64
import re
from collections.abc import Mapping
from typing import Any

import numpy as np

from pytest_libero.protocol.errors import EpisodeError
from pytest_libero.protocol.hashing import array_sha256

FORMAT = "pytest-libero-case-evidence/1"
INDEX_NAME = "observations.jsonl"
ACTIONS_NAME = "actions.jsonl"
VIDEO_NAME = "episode.mp4"
RECORD_NAME = "episode.json"
"""The case record, written beside the evidence by ``episode.case``."""

CONTROLS_NAME = "controls.jsonl"
"""Level dataset: one line per control, its scene images' sha256 and stream frames."""

FULL = "full"
REPLAYABLE = "replayable"
DATASET = "dataset"
LEVELS = (FULL, REPLAYABLE, DATASET)
"""What a case folder keeps (``--libero-evidence``, ``RunPlan.evidence``).

full: every delivered observation losslessly (the ``.mkv`` streams, the proprio bytes),
plus everything replayable keeps. replayable: the sha256 of every delivered image and
proprio vector, the exact actions, the video; enough to re-execute the episode and
check every observation against its hash, not to read the observations back. dataset:
everything full keeps, and both cameras' images at every control, delivered or not
(``controls.jsonl`` and the ``controls.<camera>.mkv`` streams): what a dataset needs
to have one frame per control."""
STREAMED = (FULL, DATASET)
"""The levels that keep the delivered observations themselves."""

CAMERA_NAME = re.compile(r"^[A-Za-z0-9_.-]+$")


class EvidenceError(EpisodeError):
    """Evidence could not be written or read back; it names the file and the cause.

    ``summary`` holds what close() could still account for, when it raised.
    """

    kind = "evidence"
    cause = "evidence"

    def __init__(self, message: str, summary: dict[str, Any] | None = None) -> None:
        super().__init__(message)
        self.summary = summary


def stream_name(camera: str) -> str:
    """File name of a camera's lossless stream inside the case folder."""
    return f"observations.{camera}.mkv"


def control_stream_name(camera: str) -> str:
    """File name of a camera's lossless stream of every control's image (level dataset)."""
    return f"controls.{camera}.mkv"


def encode_array(array: np.ndarray) -> dict[str, Any]:
    """Exact, self-describing JSON form of an array: dtype, shape, base64 bytes."""
    contiguous = np.ascontiguousarray(array)
    return {
        "dtype": contiguous.dtype.str,
        "shape": list(contiguous.shape),
        "base64": base64.b64encode(contiguous.tobytes()).decode("ascii"),
        "sha256": array_sha256(contiguous),
    }


def hash_array(array: np.ndarray) -> dict[str, Any]:
    """The array form without its bytes: dtype, shape and the same sha256."""
    contiguous = np.ascontiguousarray(array)
    return {
        "dtype": contiguous.dtype.str,
        "shape": list(contiguous.shape),
        "sha256": array_sha256(contiguous),
    }


def decode_array(record: Mapping[str, Any]) -> np.ndarray:
    """Inverse of the JSON array form; the bytes come back exactly."""
    raw = base64.b64decode(record["base64"])
    return np.frombuffer(raw, dtype=np.dtype(record["dtype"])).reshape(record["shape"]).copy()
