"""The seeded draw: every perturbation parameter from (kind, level, case, attempt).

The level fixes the magnitude (perturb/levels.py); a PCG64 generator seeded from a
sha256 of the generator version, the documented seed, the unperturbed case id, the kind,
the level and the attempt draws the directions. Two runs of a case therefore apply the
same perturbation on any machine, and the record keeps the drawn values so a reader (and
``pytest-libero verify``) can check them.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
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
    """Robot, position, environment: how many draws were rejected and drawn again."""
    generator: str = GENERATOR

    def as_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "level": self.level, "parameters": self.parameters,
                "seed": self.seed, "generator": self.generator, "redraws": self.attempt}


def seed_of(*parts: object) -> int:
    """A 64-bit seed from the parts' text: the same on every machine and Python."""
    text = ":".join(str(p) for p in (GENERATOR, PERTURB_SEED, *parts))
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")


Magnitudes = Mapping[str, float]
Context = Mapping[str, Sequence[str]]
"""What a scene kind's draw needs from the built scene, as sorted names: ``objects``
(position: the objects it moves), ``candidates`` and ``textures`` (environment: the
installed objects not in the scene, the installed textures)."""
PLACEMENT_SAMPLES = 24
"""Environment: how many (u, v, yaw) spots are drawn per distractor; the first one clear
of everything by the margin is used (perturb/environment.py)."""


def _camera(rng: np.random.Generator, _f: np.random.Generator, m: Magnitudes,
            _: Context) -> dict[str, Any]:
    signs = rng.choice([-1.0, 1.0], size=4)
    return {
        "azimuth_deg": signs[0] * m["azimuth_deg"],
        "elevation_deg": signs[1] * m["elevation_deg"],
        "distance_factor": 1.0 + signs[2] * m["distance"],
        "roll_deg": signs[3] * m["roll_deg"],
    }


def _light(rng: np.random.Generator, _f: np.random.Generator, m: Magnitudes,
           _: Context) -> dict[str, Any]:
    signs = rng.choice([-1.0, 1.0], size=2)
    return {
        "intensity_factor": 1.0 + signs[0] * m["intensity"],
        "tilt_deg": m["tilt_deg"],
        "tilt_toward_deg": float(rng.uniform(0.0, 360.0)),
        "tint": [float(1.0 + t) for t in rng.uniform(-m["tint"], m["tint"], 3)],
        "ambient_shift": signs[1] * m["ambient"],
    }


def _robot(rng: np.random.Generator, _f: np.random.Generator, m: Magnitudes,
           _: Context) -> dict[str, Any]:
    direction = rng.uniform(-1.0, 1.0, 7)
    return {"joint_offsets_rad": [float(v) for v in
                                  direction / np.abs(direction).max() * m["offset_rad"]]}


def _noise(_: np.random.Generator, _f: np.random.Generator, m: Magnitudes,
           __: Context) -> dict[str, Any]:
    return {"sigma": m["sigma"], "jpeg_quality": int(m["jpeg_quality"])}


def _position(rng: np.random.Generator, _f: np.random.Generator, m: Magnitudes,
              context: Context) -> dict[str, Any]:
    """One direction per moved object, in the order of their sorted names."""
    objects = sorted(context.get("objects", ()))
    angles = rng.uniform(0.0, 360.0, len(objects))
    return {"offset_m": m["offset_m"],
            "direction_deg": {name: round(float(a), 6) for name, a in zip(objects, angles)}}


def _environment(rng: np.random.Generator, first: np.random.Generator, m: Magnitudes,
                 context: Context) -> dict[str, Any]:
    """Which installed objects join the scene and, from level 2 on, which installed
    texture the table, the floor and the walls get (drawn by the first attempt's
    generator: the scene is built once), and where each object may stand (fractions of
    the area around the task, resolved by perturb/environment.py; redrawn per attempt)."""
    candidates = sorted(context.get("candidates", ()))
    count = int(m["distractors"])
    if len(candidates) < count:
        raise ValueError(f"{count} distractors asked, {len(candidates)} installed objects left")
    chosen = [candidates[i] for i in first.choice(len(candidates), size=count, replace=False)]
    textures: dict[str, str] = {}
    if m["textures"]:
        names = sorted(context.get("textures", ()))
        picked = first.choice(len(names), size=3, replace=False)
        textures = {part: names[i] for part, i in zip(("table", "floor", "wall"), picked)}
    spots = rng.uniform(0.0, 1.0, (count, PLACEMENT_SAMPLES, 3))
    return {"distractors": chosen, "margin_m": m["margin_m"],
            "spots": [[[round(float(u), 6), round(float(v), 6), round(float(w) * 360.0, 4)]
                       for u, v, w in row] for row in spots],
            "textures": textures}


def _object(rng: np.random.Generator, _f: np.random.Generator, m: Magnitudes,
            _: Context) -> dict[str, Any]:
    return appearance.drawn(rng, m)


Draw = Callable[[np.random.Generator, np.random.Generator, Magnitudes, Context], dict[str, Any]]
"""A kind's drawing function: the attempt's generator, the first attempt's, the level's
magnitudes, the scene's names."""
DRAWS: dict[str, Draw] = {
    "camera": _camera, "light": _light, "robot": _robot, "noise": _noise,
    "position": _position, "environment": _environment, "object": _object,
}
"""Each kind's drawing function; a new kind registers its own here. The semantic kind
draws nothing: its parameters are the frozen table's line for the case and level."""
TABLE_KINDS = ("semantic",)


def draw(kind: str, level: int, case_id: str, attempt: int = 0,
         context: Context | None = None) -> Perturbation:
    """The perturbation of ``case_id`` (the unperturbed case) at ``kind`` and ``level``."""
    if kind not in TABLE or (kind not in DRAWS and kind not in TABLE_KINDS):
        raise ValueError(f"no perturbation kind {kind!r}")
    seed = seed_of(case_id, kind, level, attempt)
    rng = np.random.Generator(np.random.PCG64(seed))
    first = np.random.Generator(np.random.PCG64(seed_of(case_id, kind, level, 0)))
    if kind == "semantic":  # nothing drawn: the frozen table's line (perturb/semantic.py)
        parameters = semantic.parameters(case_id, level)
    else:
        parameters = DRAWS[kind](rng, first, TABLE[kind][level], context or {})
    parameters = {k: float(v) if isinstance(v, np.floating) else v for k, v in parameters.items()}
    return Perturbation(kind, level, parameters, seed, attempt)


def noise_generator(perturbation: Perturbation, policy_call: int) -> np.random.Generator:
    """The noise of one delivery: its own generator per (case, policy call)."""
    return np.random.Generator(np.random.PCG64(seed_of(perturbation.seed, "call", policy_call)))
