"""The golden observations: four real first observations (P4, P5), one from each standard
suite's first task, written by ``release/build_golden.py`` and pinned here by sha256.

Each is read bounded, as a regular file only, and must be the file this version shipped,
as the demo's files are (``policy/builtin/demo_files.py``): a certificate names the set
by :data:`GOLDEN_SET_SHA256`, so two certificates compare only when they sent the same
bytes.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

import numpy as np

from pytest_libero.policy.builtin.demo_files import pinned_bytes
from pytest_libero.policy.contract import Observation
from pytest_libero.protocol.hashing import sha256_bytes

GOLDEN_FOLDER: Final = "golden"
SHIPPED_SHA256: Final[Mapping[str, str]] = {
    "golden.json": "71ef7a52db59b69796a8ab7f32131e83e43cbb3ca6229c89f95f9d3630c848a7",
    "libero_10-00.npz": "6786367aa0ff6e1fd081a8143a3d9a1939f2b45607a999f007819f8d810266da",
    "libero_goal-00.npz": "6dcdf188d37ed4fa9d82fd99650cd586613d8fe2c6cec6b16913a11d0f6b70d3",
    "libero_object-00.npz": "c86788131b9c2f4a6fc4067ef62c63d9f26804abac2ef2012c567fb10e30129a",
    "libero_spatial-00.npz": "989ca2bf7c7dd6dbfff9c8525304f5e2d56b640b2d745f162d3206dd9d0eb89d",
}
GOLDEN_SET_SHA256: Final = sha256_bytes(
    "".join(f"{name} {digest}\n" for name, digest in sorted(SHIPPED_SHA256.items())).encode())
"""The set's identity in a certificate: the sha256 of its files' names and hashes."""
MAX_BYTES: Final = 1 << 20
"""The most one golden file may hold (the largest shipped one holds 200 kB)."""


@dataclass(frozen=True)
class Golden:
    """One golden observation and the case it was delivered in."""

    case: str
    observation: Observation


def golden_bytes(name: str) -> bytes:
    """A golden file's bytes, once they are those this version shipped."""
    return pinned_bytes(GOLDEN_FOLDER, name, SHIPPED_SHA256[name], MAX_BYTES)


def golden_observations(*, proprio: bool) -> list[Golden]:
    """The golden set in case order; ``proprio`` for a profile on the rgb+proprio track."""
    languages = json.loads(golden_bytes("golden.json"))["cases"]
    golden = []
    for case in sorted(languages):
        with np.load(io.BytesIO(golden_bytes(f"{case}.npz")), allow_pickle=False) as arrays:
            images = {camera: np.ascontiguousarray(arrays[camera])
                      for camera in ("agentview", "robot0_eye_in_hand")}
            vector = np.asarray(arrays["proprio"], dtype=np.float64)
        golden.append(Golden(case, Observation(language=str(languages[case]), images=images,
                                               proprio=vector if proprio else None)))
    return golden
