"""Where things stand on a table: the environment kind's geometry and scene edits.

The environment kind (perturb/kinds/environment.py) adds the drawn distractors to the
task's MJCF model, swaps the texture files of the table, floor and walls in its XML
(:func:`retexture`) and rebuilds the simulation once. The released init state is then
installed joint by joint (:func:`map_state`), so every task object starts exactly where
it does natively, and each distractor is put on the first drawn spot that lies on the
table, is clear of every other body by the margin and keeps the margin from every region
the goal names (:func:`goal_regions`: a distractor in the goal's target zone would change
what the goal asks, not only what the scene shows) (:func:`place`). Nothing here imports
the simulator; the kind passes in what LIBERO holds (and MuJoCo's bindings, for rays).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from pytest_libero.perturb.contacts import SUPPORT, free_joint

TEXTURE_PARTS: Mapping[str, tuple[str, ...]] = {
    "table": ("tex-table", "tex-living_room_table"),
    "floor": ("texplane",),
    "wall": ("tex-wall",),
}
"""Which of LIBERO's scene textures (by name in the MJCF) each drawn texture replaces."""
GRAPHABLE = ("hope_objects", "google_scanned_objects")
"""The installed object families distractors come from: small objects that stand."""
FLAT_RAY_TOLERANCE_M = 0.01
PLANE = 0
"""MuJoCo's mjGEOM_PLANE."""
PREFIX = "distractor_"


def candidate_objects(registry: Mapping[str, Any], scene_categories: Sequence[str]) -> list[str]:
    """Installed object categories a distractor may be: from the small-object families,
    with a plain upright rotation, and neither a category of the scene nor a variant of
    one (``green_ketchup`` beside ``ketchup``)."""
    found = []
    for name, cls in registry.items():
        if not cls.__module__.endswith(GRAPHABLE):
            continue
        if any(s in name or name in s for s in scene_categories):
            continue
        found.append(name)
    return sorted(found)


def texture_files(directory: Path) -> list[str]:
    """The installed texture images a scene part can take, by file name: square ones only.
    LIBERO's tables are cube textures, which MuJoCo builds from one image only when it
    is square (``table_light_wood.png``, 509x339, fails to compile there)."""
    from PIL import Image

    square = []
    for path in sorted(directory.glob("*.png")):
        with Image.open(path) as image:  # reads the header only
            width, height = image.size
        if width == height:
            square.append(path.name)
    return square


def retexture(xml: str, textures: Mapping[str, str], directory: Path) -> tuple[str, dict[str, Any]]:
    """The XML with each part's textures pointing at the drawn file; the record of what
    was replaced (texture name: old file -> new file)."""
    replaced: dict[str, Any] = {}

    def swap(match: re.Match[str]) -> str:
        tag = match.group(0)
        name = re.search(r'name="([^"]+)"', tag)
        old = re.search(r'file="([^"]+)"', tag)
        if name is None or old is None:
            return tag
        for part, names in TEXTURE_PARTS.items():
            if name.group(1) in names and part in textures:
                new = str(directory / textures[part])
                replaced[name.group(1)] = {"part": part, "from": Path(old.group(1)).name,
                                           "to": textures[part]}
                return tag.replace(old.group(0), f'file="{new}"')
        return tag

    return re.sub(r"<texture\b[^>]*>", swap, xml), replaced


def layout(model: Any) -> dict[str, tuple[int, int, int, int]]:
    """Each joint's (qpos address, qpos size, qvel address, qvel size)."""
    sizes = {0: (7, 6), 1: (4, 3), 2: (1, 1), 3: (1, 1)}  # free, ball, slide, hinge
    out = {}
    for j in range(model.njnt):
        nq, nv = sizes[int(model.jnt_type[j])]
        out[model.joint_id2name(j)] = (int(model.jnt_qposadr[j]), nq, int(model.jnt_dofadr[j]), nv)
    return out


def map_state(state: np.ndarray, old: Mapping[str, tuple[int, int, int, int]], old_nq: int,
              new: Mapping[str, tuple[int, int, int, int]], template: np.ndarray,
              new_nq: int) -> np.ndarray:
    """The released state (laid out for the native model) laid out for the model with
    distractors: every native joint's values where that joint now lives; the
    distractors' from ``template`` (the rebuilt simulation's own state)."""
    out = np.array(template, dtype=np.float64)
    out[0] = state[0]
    for name, (qa, nq, va, nv) in old.items():
        qb, _, vb, _ = new[name]
        out[1 + qb:1 + qb + nq] = state[1 + qa:1 + qa + nq]
        out[1 + new_nq + vb:1 + new_nq + vb + nv] = state[1 + old_nq + va:1 + old_nq + va + nv]
    return out


def upright(rotation: Any, axis: Any, yaw_deg: float) -> np.ndarray | None:
    """The quaternion of an object standing as LIBERO stands it, turned by ``yaw_deg``
    about the vertical; None for a rotation form this does not read.

    LIBERO's object models are upright as they are: its samplers turn them about the
    vertical only (the released init states hold pure yaw quaternions for objects with
    ``rotation_axis`` x), so a plain ``rotation`` number or equal pair is a yaw, and the
    drawn yaw replaces it. A rotation per axis (a dict) is refused: such objects are not
    offered as distractors."""
    if isinstance(rotation, (int, float)):
        pass
    elif not (isinstance(rotation, (tuple, list)) and len(rotation) == 2 and rotation[0] == rotation[1]):
        return None
    if axis not in ("x", "y", "z"):
        return None
    half = math.radians(yaw_deg) / 2
    return np.array([math.cos(half), 0.0, 0.0, math.sin(half)])


def collision_geoms(model: Any) -> np.ndarray:
    return np.array([g for g in range(model.ngeom)
                     if model.geom_contype[g] or model.geom_conaffinity[g]], dtype=int)


def floor_planes(sim: Any) -> list[tuple[float, int]]:
    """The collision planes (the arena's floor), as (height, geom), highest first.
    robosuite files the floor among the visual geoms (group 1), which the rays skip."""
    model = sim.model
    return sorted(((float(sim.data.geom_xpos[g][2]), g) for g in range(model.ngeom)
                   if int(model.geom_type[g]) == PLANE
                   and (model.geom_contype[g] or model.geom_conaffinity[g])), reverse=True)


def _ray_down(mujoco: Any, sim: Any, x: float, y: float, exclude: int = -1,
              planes: Sequence[tuple[float, int]] = ()) -> tuple[int, float]:
    """The first collision geom straight below (x, y) from 2 m up (body ``exclude``
    ignored), and its height; (-1, nan) when there is none.

    robosuite keeps collision geoms in group 0 and visual ones in group 1, so the ray
    looks at group 0; but the arena's floor is a collision plane in group 1 (the support
    of libero_object's scenes). Where nothing in group 0 lies below, the highest of
    ``planes`` (:func:`floor_planes`) below the ray's start is the hit."""
    geomid = np.array([-1], dtype=np.int32)
    group = np.array([1, 0, 0, 0, 0, 0], dtype=np.uint8)
    dist = mujoco.mj_ray(sim.model._model, sim.data._data, np.array([x, y, 2.0]),
                         np.array([0.0, 0.0, -1.0]), group, 1, exclude, geomid)
    if int(geomid[0]) >= 0:
        return int(geomid[0]), 2.0 - float(dist)
    return next(((g, z) for z, g in planes if z < 2.0), (-1, math.nan))


def support_height(mujoco: Any, sim: Any, owner: Sequence[str],
                   points: Sequence[Sequence[float]]) -> float | None:
    """The table's height: the median height of the support just beside the task's
    objects (a ray a little outside each), None when no ray meets the support. A ray
    meets a floor plane only in a scene with no table beside its objects (the floor is
    then the support: libero_object), never in place of the table."""
    for planes in ([], floor_planes(sim)):
        heights = []
        for x, y in points:
            for dx, dy in ((0.08, 0), (-0.08, 0), (0, 0.08), (0, -0.08)):
                g, z = _ray_down(mujoco, sim, x + dx, y + dy, planes=planes)
                if g >= 0 and owner[g] == SUPPORT:
                    heights.append(z)
        if heights:
            return float(np.median(heights))
    return None


Box = tuple[float, float, float, float]
"""A horizontal rectangle in world coordinates: (x0, y0, x1, y1)."""


def goal_regions(sim: Any, sites: Mapping[str, Any], goal_state: Sequence[Sequence[str]]) -> dict[str, Box]:
    """The world rectangles of the regions (LIBERO's target-zone sites) the goal names,
    by name; a goal naming only objects and fixtures has none."""
    named = {str(arg) for predicate in goal_state for arg in list(predicate)[1:]}
    boxes: dict[str, Box] = {}
    for name in sorted(named & set(sites)):
        try:
            sid = sim.model.site_name2id(name)
        except ValueError:
            continue
        centre = np.asarray(sim.data.site_xpos[sid])
        rot = np.asarray(sim.data.site_xmat[sid]).reshape(3, 3)
        half = np.asarray(sim.model.site_size[sid])
        corners = [centre + rot @ (np.array([sx, sy, 0.0]) * half)
                   for sx in (-1, 1) for sy in (-1, 1)]
        xs, ys = [float(c[0]) for c in corners], [float(c[1]) for c in corners]
        boxes[name] = (round(min(xs), 6), round(min(ys), 6), round(max(xs), 6), round(max(ys), 6))
    return boxes


def keeps_out(x: float, y: float, reach: float, margin: float, boxes: Sequence[Box]) -> bool:
    """Whether an object within ``reach`` of (x, y) keeps ``margin`` from every box."""
    grow = reach + margin
    return all(x + grow < x0 or x - grow > x1 or y + grow < y0 or y - grow > y1
               for x0, y0, x1, y1 in boxes)


def _bottom_and_reach(sim: Any, geoms: Sequence[int], origin: Sequence[float]) -> tuple[float, float]:
    """The lowest point of these geoms and their horizontal reach from ``origin`` (the
    spot the body stands on: geoms may sit off the body's origin)."""
    model, data = sim.model, sim.data
    low, reach = math.inf, 0.0
    for g in geoms:
        center, half = model.geom_aabb[g][:3], model.geom_aabb[g][3:]
        rot = np.asarray(data.geom_xmat[g]).reshape(3, 3)
        for corner in np.array(np.meshgrid([-1, 1], [-1, 1], [-1, 1])).T.reshape(-1, 3):
            world = np.asarray(data.geom_xpos[g]) + rot @ (center + corner * half)
            low = min(low, float(world[2]))
            reach = max(reach, float(np.hypot(world[0] - origin[0], world[1] - origin[1])))
    return low, reach


def _probes(reach: float) -> list[tuple[float, float]]:
    """Where the flat-table rays go around a spot: its centre and eight points on the
    footprint's edge (the four axes and the four diagonals)."""
    side = reach / math.sqrt(2.0)
    return [(0.0, 0.0), (reach, 0.0), (-reach, 0.0), (0.0, reach), (0.0, -reach),
            (side, side), (side, -side), (-side, side), (-side, -side)]


def place(mujoco: Any, sim: Any, joint: str, geoms: Sequence[int], others: Sequence[int],
          owner: Sequence[str], quat: np.ndarray, spots: Sequence[Sequence[float]],
          area: Box, table_z: float, margin: float,
          keep_out: Sequence[Box] = ()) -> dict[str, Any] | None:
    """Put the object on the first spot on the flat table whose geoms are clear of
    ``others`` by ``margin`` and that keeps ``margin`` from each ``keep_out`` rectangle
    (the goal's regions); its pose, or None when no spot serves."""
    qpos, qvel = free_joint(sim, joint)
    body = int(sim.model.jnt_bodyid[sim.model.joint_name2id(joint)])
    x0, y0, x1, y1 = area
    planes = floor_planes(sim)
    for i, (u, v, _) in enumerate(spots):
        x, y = x0 + u * (x1 - x0), y0 + v * (y1 - y0)
        sim.data.qpos[qpos:qpos + 7] = [x, y, table_z + 0.5, *quat]
        sim.data.qvel[qvel:qvel + 6] = 0.0
        sim.forward()
        low, reach = _bottom_and_reach(sim, geoms, (x, y))
        sim.data.qpos[qpos + 2] += table_z + 0.002 - low
        sim.forward()
        flat = True
        for dx, dy in _probes(reach):
            g, z = _ray_down(mujoco, sim, x + dx, y + dy, body, planes)
            if g < 0 or owner[g] != SUPPORT or abs(z - table_z) > FLAT_RAY_TOLERANCE_M:
                flat = False
                break
        if not flat or not keeps_out(x, y, reach, margin, keep_out):
            continue
        if _clear(mujoco, sim, geoms, others, margin):
            return {"spot": i, "pos": [round(float(v), 6) for v in sim.data.qpos[qpos:qpos + 3]],
                    "quat": [round(float(v), 6) for v in sim.data.qpos[qpos + 3:qpos + 7]]}
    sim.data.qpos[qpos:qpos + 3] = [0.0, 0.0, -5.0]  # out of the way until redrawn
    sim.forward()
    return None


def _clear(mujoco: Any, sim: Any, geoms: Sequence[int], others: Sequence[int], margin: float) -> bool:
    fromto = np.zeros(6)
    m, d = sim.model._model, sim.data._data
    for g in geoms:
        for o in others:
            if mujoco.mj_geomDistance(m, d, int(g), int(o), margin, fromto) < margin:
                return False
    return True
