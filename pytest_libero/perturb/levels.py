"""The one table of generated perturbations: each kind's magnitude at levels 1-4.

A level fixes how large a change is; a generator seeded from the case id draws only its
directions (perturb/draw.py). Everything here is hashed into the perturbed cases'
identity (``libero-perturb-v1``), so changing a magnitude changes what a result means.
docs/perturbations.md prints the same table.

A new kind is one entry in ``TABLE`` (its levels' magnitudes; ``KINDS`` follows the
table's order), one drawing function registered in perturb/draw.py's ``DRAWS``, and
where the adapter applies it. The identity moves with the table; raise ``GENERATOR``
only when an existing kind's draw changes.
"""

from __future__ import annotations

from functools import cache
from typing import Final

from pytest_libero.catalog.instructions import table_sha256
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.identity import identity_with

GENERATOR: Final = "pytest-libero-perturb/1"
"""The drawing code's version: raise it whenever a draw would come out differently.
Adding a kind does not: the existing kinds' draws stay byte-identical (old runs still
verify), and the perturbed identity moves anyway, since it hashes the whole table."""
PERTURB_SEED: Final = 20261201
"""The one documented seed every draw starts from, with the case id, kind and level."""
LEVELS: Final = (1, 2, 3, 4)

TABLE: Final[dict[str, dict[int, dict[str, float]]]] = {
    # The agentview camera orbits a point on its optical axis (where the axis meets the
    # plane of the task objects): degrees of azimuth and elevation, a distance factor,
    # degrees of roll about its own axis. The wrist camera and the physics are untouched.
    "camera": {
        1: {"azimuth_deg": 4.0, "elevation_deg": 2.0, "distance": 0.04, "roll_deg": 2.0},
        2: {"azimuth_deg": 8.0, "elevation_deg": 4.0, "distance": 0.08, "roll_deg": 4.0},
        3: {"azimuth_deg": 15.0, "elevation_deg": 7.0, "distance": 0.15, "roll_deg": 7.0},
        4: {"azimuth_deg": 25.0, "elevation_deg": 10.0, "distance": 0.25, "roll_deg": 10.0},
    },
    # Every scene light: diffuse intensity scaled by 1 +- intensity, its direction tilted
    # by tilt_deg, each colour channel scaled by up to 1 +- tint, and ambient light
    # added (+) or removed (-) by ambient. Physics untouched.
    "light": {
        1: {"intensity": 0.15, "tilt_deg": 8.0, "tint": 0.05, "ambient": 0.05},
        2: {"intensity": 0.30, "tilt_deg": 15.0, "tint": 0.10, "ambient": 0.10},
        3: {"intensity": 0.45, "tilt_deg": 25.0, "tint": 0.15, "ambient": 0.15},
        4: {"intensity": 0.60, "tilt_deg": 35.0, "tint": 0.20, "ambient": 0.20},
    },
    # The arm's seven joints offset from the init state's by a drawn direction whose
    # largest entry is offset_rad, before the settling controls; never into contact.
    "robot": {
        1: {"offset_rad": 0.05},
        2: {"offset_rad": 0.10},
        3: {"offset_rad": 0.15},
        4: {"offset_rad": 0.20},
    },
    # Both delivered images, after the native flip: Gaussian noise of sigma (0-255 scale)
    # drawn per policy call, then JPEG at quality (100: none). The simulator is untouched.
    "noise": {
        1: {"sigma": 3.0, "jpeg_quality": 90.0},
        2: {"sigma": 6.0, "jpeg_quality": 70.0},
        3: {"sigma": 10.0, "jpeg_quality": 50.0},
        4: {"sigma": 16.0, "jpeg_quality": 30.0},
    },
    # The task's movable objects standing on the table (those the goal names) each moved
    # offset_m horizontally from the init state's placement, in a drawn direction per
    # object, before the settling controls; a draw after which anything touches what it
    # must not, falls, still moves or already meets the goal is drawn again
    # (perturb/position.py). LIBERO-PRO's position sweep steps 0.07 m.
    "position": {
        1: {"offset_m": 0.03},
        2: {"offset_m": 0.06},
        3: {"offset_m": 0.09},
        4: {"offset_m": 0.12},
    },
    # distractors objects from LIBERO's installed ones not in the scene, placed on the
    # table clear of everything by margin_m; textures 1: the table, floor and walls
    # retextured with other installed textures (perturb/environment.py).
    "environment": {
        1: {"distractors": 1.0, "textures": 0.0, "margin_m": 0.04},
        2: {"distractors": 2.0, "textures": 1.0, "margin_m": 0.04},
        3: {"distractors": 3.0, "textures": 1.0, "margin_m": 0.04},
        4: {"distractors": 4.0, "textures": 1.0, "margin_m": 0.04},
    },
    # The task objects' look only (perturb/appearance.py): each material's colour moves
    # toward a drawn colour by the fraction colour; at texture 1 its texture is swapped
    # for another 2D texture of LIBERO's installed assets that the scene loaded. Geometry,
    # mass, friction and every physical parameter stay the twin's.
    "object": {
        1: {"colour": 0.35, "texture": 0.0},
        2: {"colour": 0.60, "texture": 0.0},
        3: {"colour": 0.60, "texture": 1.0},
        4: {"colour": 0.90, "texture": 1.0},
    },
    # The instruction only, from the frozen table catalog/build_instructions.py writes:
    # 1 one synonym; 2 synonyms throughout and another sentence frame; 3 plus a clause
    # about an object the task leaves alone; 4 plus task objects named by description.
    "semantic": {
        1: {"synonyms_all": 0.0, "frame": 0.0, "clause": 0.0, "describe": 0.0},
        2: {"synonyms_all": 1.0, "frame": 1.0, "clause": 0.0, "describe": 0.0},
        3: {"synonyms_all": 1.0, "frame": 1.0, "clause": 1.0, "describe": 0.0},
        4: {"synonyms_all": 1.0, "frame": 1.0, "clause": 1.0, "describe": 1.0},
    },
}
KINDS: Final = tuple(TABLE)
"""The generated kinds, in the table's order (the option's, the reports')."""
NOISE_CAMERAS: Final = ("agentview", "robot0_eye_in_hand")
"""Which delivered images the noise kind corrupts: both."""
ROBOT_REDRAWS: Final = 20
"""How many deterministic redraws a robot offset that touches something may take."""
SCENE_REDRAWS: Final = 12
"""How many deterministic redraws a position or environment draw that is rejected after
settling may take (each costs the settling controls again)."""
SETTLED: Final[dict[str, float]] = {
    "max_speed_m_s": 0.02,  # an object faster than this after settling is still moving
    "max_spin_rad_s": 0.5,
    "max_drop_m": 0.02,     # an object lower than its placement by more has left its support
}
"""What "at rest on its support" means for the position and environment kinds."""


def parse_perturbations(text: str) -> tuple[tuple[str, int], ...]:
    """``camera:2,noise:1`` or ``all`` -> ((kind, level), ...), in the table's order."""
    if text.strip() == "all":
        return tuple((kind, level) for kind in KINDS for level in LEVELS)
    asked: set[tuple[str, int]] = set()
    for part in text.replace(" ", "").split(","):
        if not part:
            continue
        kind, sep, level = part.partition(":")
        if not sep or kind not in KINDS or level not in {str(v) for v in LEVELS}:
            raise SetupError(
                f"--libero-perturb={text!r}: cannot read {part!r}; write KIND:LEVEL[,KIND:LEVEL...] "
                f"with KIND one of {', '.join(KINDS)} and LEVEL 1-4, or all"
            )
        asked.add((kind, int(level)))
    if not asked:
        raise SetupError(f"--libero-perturb={text!r}: no KIND:LEVEL given")
    return tuple(p for p in ((k, v) for k in KINDS for v in LEVELS) if p in asked)


def level_table() -> dict[str, object]:
    """What the perturbed identity hashes: the generator, the seed and the table."""
    return {"generator": GENERATOR, "seed": PERTURB_SEED, "noise_cameras": list(NOISE_CAMERAS),
            "robot_redraws": ROBOT_REDRAWS, "scene_redraws": SCENE_REDRAWS,
            "settled": dict(SETTLED), "instructions_sha256": table_sha256(),
            "table": {k: {str(v): dict(p) for v, p in levels.items()} for k, levels in TABLE.items()}}


@cache
def perturb_identity(mode: str = "fast") -> str:
    """The identity of a case under a generated perturbation (``libero-perturb-v1:``): its
    mode's protocol payload plus this module's generator, seed and table, so native
    identities never move because perturbations exist."""
    return identity_with("libero-perturb", {"perturbations": level_table()}, mode, "perturbed")
