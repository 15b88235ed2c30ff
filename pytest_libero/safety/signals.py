"""Per-control safety signals of one episode: compact, saved beside the evidence.

The adapter samples them from simulator state the policy never sees (one row after
every policy control); everything the verdict needs is here, so thresholds can be
changed and verdicts recomputed offline (:func:`pytest_libero.safety.verdict.evaluate`).
"""

from __future__ import annotations

import io
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from pytest_libero.files import Refused, json_text, read_capped

SIGNALS_NAME = "safety.npz"
ARRAYS = ("displacement_m", "tilt_deg", "rotation_deg", "height_m", "contact", "grasp", "reach_m")
FILE_LIMIT = 64 << 20
"""The most bytes a signals file may hold: seven arrays of controls x objects, compressed
(a long episode's is a few hundred kilobytes)."""
UNPACKED_LIMIT = 256 << 20
"""The most bytes its arrays may unpack to: a small file that would unpack to gigabytes
is refused, not inflated."""


@dataclass(frozen=True)
class Signals:
    """Rows are controls 1..T after settling; columns are the task's movable objects.

    ``displacement_m``: distance from the settled position; ``tilt_deg``: how far the
    direction that pointed up when the object settled now points away from vertical;
    ``rotation_deg``: total rotation since settling; ``height_m``: height of the
    object's origin; ``contact``: a robot link touched it during the control (any
    physics substep); ``grasp``: both gripper fingers did; ``reach_m``: distance from
    the gripper's end-effector site.
    """

    objects: tuple[str, ...]
    goal: tuple[bool, ...]
    """Named by the BDDL goal (or LIBERO's objects of interest)."""
    support_m: float
    """Height of the lowest settled object: the support surface, for "dropped"."""
    displacement_m: np.ndarray
    tilt_deg: np.ndarray
    rotation_deg: np.ndarray
    height_m: np.ndarray
    contact: np.ndarray
    grasp: np.ndarray
    reach_m: np.ndarray

    @property
    def controls(self) -> int:
        return int(self.displacement_m.shape[0])

    def save(self, path: Path) -> None:
        meta = {"objects": list(self.objects), "goal": list(self.goal), "support_m": self.support_m}
        text = json_text(meta, sort_keys=False)
        np.savez_compressed(path, meta=np.frombuffer(text.encode(), dtype=np.uint8),
                            **{name: getattr(self, name) for name in ARRAYS})

    @classmethod
    def load(cls, path: Path) -> Signals:
        """A case folder's signals file, read as the run wrote it: a regular file in its
        folder, never through a link, bounded (``files.Refused`` otherwise)."""
        data = read_capped(path, FILE_LIMIT, links=False)
        with np.load(io.BytesIO(data), allow_pickle=False) as found:
            unpacked = sum(info.file_size for info in found.zip.infolist())
            if unpacked > UNPACKED_LIMIT:
                raise Refused(f"{path} unpacks to {unpacked} bytes, more than a valid one "
                              f"can ({UNPACKED_LIMIT})")
            meta = json.loads(bytes(found["meta"]).decode())
            arrays = {name: np.asarray(found[name]) for name in ARRAYS}
        return cls(tuple(meta["objects"]), tuple(meta["goal"]), float(meta["support_m"]), **arrays)
