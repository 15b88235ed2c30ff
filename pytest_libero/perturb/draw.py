"""The seeded draw: every perturbation parameter from (kind, level, case, attempt).

The level fixes the magnitude (perturb/levels.py); a PCG64 generator seeded from a
sha256 of the generator version, the documented seed, the unperturbed case id, the kind,
the level and the attempt draws the directions. Two runs of a case therefore apply the
same perturbation on any machine, and the record keeps the drawn values so a reader (and
``pytest-libero verify``) can check them.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from typing import Any

import numpy as np

from pytest_libero.perturb import appearance, semantic
from pytest_libero.perturb.levels import GENERATOR, PERTURB_SEED, TABLE


@dataclass(frozen=True)
class Perturbation:
    """One drawn perturbation, as the record keeps it."""

    kind: str
    level: int
    parameters: dict[str, Any]
    seed: int
    attempt: int = 0
    """Robot offsets only: how many draws touched something and were drawn again."""
    generator: str = GENERATOR

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "level": self.level, "parameters": self.parameters,
                "seed": self.seed, "generator": self.generator, "redraws": self.attempt}


def seed_of(*parts: object) -> int:
    """A 64-bit seed from the parts' text: the same on every machine and Python."""
    text = ":".join(str(p) for p in (GENERATOR, PERTURB_SEED, *parts))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


def draw(kind: str, level: int, case_id: str, attempt: int = 0) -> Perturbation:
    """The perturbation of ``case_id`` (the unperturbed case) at ``kind`` and ``level``."""
    magnitudes = TABLE[kind][level]
    seed = seed_of(case_id, kind, level, attempt)
    rng = np.random.Generator(np.random.PCG64(seed))
    parameters: dict[str, Any]
    if kind == "camera":
        signs = rng.choice([-1.0, 1.0], size=4)
        parameters = {
            "azimuth_deg": signs[0] * magnitudes["azimuth_deg"],
            "elevation_deg": signs[1] * magnitudes["elevation_deg"],
            "distance_factor": 1.0 + signs[2] * magnitudes["distance"],
            "roll_deg": signs[3] * magnitudes["roll_deg"],
        }
    elif kind == "light":
        signs = rng.choice([-1.0, 1.0], size=2)
        parameters = {
            "intensity_factor": 1.0 + signs[0] * magnitudes["intensity"],
            "tilt_deg": magnitudes["tilt_deg"],
            "tilt_toward_deg": float(rng.uniform(0.0, 360.0)),
            "tint": [float(1.0 + t) for t in rng.uniform(-magnitudes["tint"], magnitudes["tint"], 3)],
            "ambient_shift": signs[1] * magnitudes["ambient"],
        }
    elif kind == "robot":
        direction = rng.uniform(-1.0, 1.0, 7)
        parameters = {"joint_offsets_rad": [float(v) for v in
                                            direction / np.abs(direction).max() * magnitudes["offset_rad"]]}
    elif kind == "noise":
        parameters = {"sigma": magnitudes["sigma"], "jpeg_quality": int(magnitudes["jpeg_quality"])}
    elif kind == "object":
        parameters = appearance.drawn(rng, magnitudes)
    elif kind == "semantic":  # nothing random: the frozen table's line (perturb/semantic.py)
        parameters = semantic.parameters(case_id, level)
    else:
        raise ValueError(f"no perturbation kind {kind!r}")
    parameters = {k: float(v) if isinstance(v, np.floating) else v for k, v in parameters.items()}
    return Perturbation(kind, level, parameters, seed, attempt)


def noise_generator(perturbation: Perturbation, policy_call: int) -> np.random.Generator:
    """The noise of one delivery: its own generator per (case, policy call)."""
    return np.random.Generator(np.random.PCG64(seed_of(perturbation.seed, "call", policy_call)))
