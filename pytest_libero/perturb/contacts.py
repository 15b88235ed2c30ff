"""Who touches whom in a built scene, and whether the scene's objects are at rest.

The position and environment kinds reject a draw after settling when an object they
placed touches anything but the table it stands on, fell, or still moves. Each geom is
named by what it belongs to: a movable object, ``robot``, a fixture, or ``support``
(the arena: table, floor, walls). Nothing here imports the simulator.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, Final

import numpy as np

ROBOT_ROOTS = ("robot0_", "mount0_", "gripper0_")
SUPPORT = "support"
ROBOT = "robot"
ROBOT_GEOMS = ("robot0_", "gripper0_")
"""The prefixes of the arm's and its gripper's geoms."""
SETTLED: Final[dict[str, float]] = {
    "max_speed_m_s": 0.02,  # an object faster than this after settling is still moving
    "max_spin_rad_s": 0.5,
    "max_drop_m": 0.02,     # an object lower than its placement by more has left its support
}
"""What "at rest on its support" means for the kinds that move or add objects."""


def robot_contacts(sim: Any) -> list[str]:
    """Contacts that involve the arm or its gripper, as "geom - geom" names."""
    model, data = sim.model, sim.data
    found = []
    for j in range(data.ncon):
        contact = data.contact[j]
        names = [model.geom_id2name(g) or f"geom{g}" for g in (contact.geom1, contact.geom2)]
        if any(n.startswith(ROBOT_GEOMS) for n in names):
            found.append(" - ".join(names))
    return found


def owners(sim: Any, objects: Mapping[str, str], fixtures: Mapping[str, str]) -> list[str]:
    """Each geom's owner: the object or fixture whose root body holds it (``objects``
    and ``fixtures`` map names to root body names), ``robot``, or ``support``."""
    model = sim.model
    by_root: dict[int, str] = {}
    for names in (fixtures, objects):
        for name, body in names.items():
            by_root[model.body_name2id(body)] = name
    out = []
    for g in range(model.ngeom):
        root = int(model.body_rootid[model.geom_bodyid[g]])
        label = by_root.get(root)
        if label is None:
            body = model.body_id2name(root) or ""
            label = ROBOT if body.startswith(ROBOT_ROOTS) else SUPPORT
        out.append(label)
    return out


def touching(sim: Any, owner: list[str]) -> set[tuple[str, str]]:
    """The pairs of owners in contact now, each pair sorted."""
    data = sim.data
    pairs = set()
    for j in range(data.ncon):
        contact = data.contact[j]
        a, b = owner[contact.geom1], owner[contact.geom2]
        if a != b:
            pairs.add((a, b) if a < b else (b, a))
    return pairs


def forbidden_contacts(placed: Iterable[str], pairs: set[tuple[str, str]],
                       allowed: set[tuple[str, str]]) -> dict[str, list[str]]:
    """For each placed object, what it touches beyond its support and the pairs that
    already touched before the perturbation (``allowed``)."""
    placed = set(placed)
    found: dict[str, list[str]] = {}
    for pair in sorted(pairs - allowed):
        a, b = pair
        for mine, other in ((a, b), (b, a)):
            if mine in placed and other != SUPPORT:
                found.setdefault(mine, []).append(other)
    return found


def free_joint(sim: Any, joint: str) -> tuple[int, int]:
    """The (qpos, qvel) addresses of a free joint."""
    model = sim.model
    j = model.joint_name2id(joint)
    return int(model.jnt_qposadr[j]), int(model.jnt_dofadr[j])


def at_rest_problems(sim: Any, joint: str, placed_z: float) -> list[str]:
    """Why an object is not at rest on its support after settling (empty: it is)."""
    qpos, qvel = free_joint(sim, joint)
    z = float(sim.data.qpos[qpos + 2])
    speed = float(np.linalg.norm(sim.data.qvel[qvel:qvel + 3]))
    spin = float(np.linalg.norm(sim.data.qvel[qvel + 3:qvel + 6]))
    problems = []
    if z < placed_z - SETTLED["max_drop_m"]:
        problems.append(f"left its support (z {z:.3f} < {placed_z:.3f})")
    if speed > SETTLED["max_speed_m_s"] or spin > SETTLED["max_spin_rad_s"]:
        problems.append(f"still moving ({speed:.3f} m/s, {spin:.2f} rad/s)")
    return problems
