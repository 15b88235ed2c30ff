"""The ``object`` kind: the task objects' look, never their physics.

A task object is one the BDDL names among its objects of interest (a region such as
``wooden_cabinet_1_top_region`` stands for its object). Its visible materials' colours
move toward a drawn colour by the level's fraction; at the texture levels each material
shows another 2D texture instead of its own, drawn among the textures the scene loaded
from LIBERO's installed assets (floor, walls, table, the other objects). Only
``mat_rgba``, ``mat_texid`` and ``geom_rgba``'s colour channels change: geometry, mass,
friction, contacts and every physical parameter stay the twin's, so the settled physics
state equals the twin's bit for bit and only the images differ. Applied after the
episode's reset (a hard reset recompiles the model).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

import numpy as np

from pytest_libero.perturb.kind import Context, Kind, KindApplied, Magnitudes
from pytest_libero.perturb.tasks import owners_of

DRAWN_OBJECTS = 8
"""How many (colour, texture) draws a case makes; the task objects take them in name order."""
TEXTURE_2D = 0
"""MuJoCo's mjTEXTURE_2D."""
ROLE_RGB = 1
"""MuJoCo's mjTEXROLE_RGB: the column of ``mat_texid`` a material's colour texture sits in."""


def drawn(rng: np.random.Generator, magnitudes: Mapping[str, float]) -> dict[str, Any]:
    """The draw: per object slot a target colour and a texture pick in [0, 1)."""
    colours = rng.uniform(0.0, 1.0, (DRAWN_OBJECTS, 3))
    picks = rng.uniform(0.0, 1.0, DRAWN_OBJECTS)
    return {"colour": float(magnitudes["colour"]), "texture": bool(magnitudes["texture"]),
            "targets": [[round(float(v), 6) for v in c] for c in colours],
            "texture_picks": [round(float(v), 6) for v in picks]}


def task_objects(env: Any) -> list[str]:
    """The task objects' instance names in a built LIBERO problem, sorted
    (perturb/tasks.py's :func:`owners_of`)."""
    names = [*getattr(env, "objects_dict", {}), *getattr(env, "fixtures_dict", {})]
    return list(owners_of(getattr(env, "obj_of_interest", []), names))


def _owned_geoms(model: Any, instance: str) -> list[int]:
    """Geoms of the object's bodies (named ``<instance>_...``), visible ones only."""
    prefix = instance + "_"
    geoms = []
    for g in range(model.ngeom):
        body = model.body_id2name(model.geom_bodyid[g]) or ""
        if (body == instance or body.startswith(prefix)) and model.geom_rgba[g][3] > 0:
            geoms.append(g)
    return geoms


def recolour(sim: Any, objects: list[str], p: dict[str, Any]) -> dict[str, Any]:
    """Change the named objects' look in the compiled model by the drawn parameters ``p``;
    return what changed (recorded)."""
    model = sim.model
    fraction = float(p["colour"])
    own_textures = set()
    owned = {name: _owned_geoms(model, name) for name in objects}
    for geoms in owned.values():
        for g in geoms:
            m = int(model.geom_matid[g])
            if m >= 0 and int(model.mat_texid[m][ROLE_RGB]) >= 0:
                own_textures.add(int(model.mat_texid[m][ROLE_RGB]))
    others = [t for t in range(model.ntex)
              if int(model.tex_type[t]) == TEXTURE_2D and t not in own_textures]
    applied: dict[str, Any] = {}
    for slot, name in enumerate(objects):
        target = np.asarray(p["targets"][slot % DRAWN_OBJECTS], dtype=np.float64)
        pick = float(p["texture_picks"][slot % DRAWN_OBJECTS])
        texture = others[int(pick * len(others))] if p["texture"] and others else None
        materials = sorted({int(model.geom_matid[g]) for g in owned[name]} - {-1})
        for m in materials:
            model.mat_rgba[m][:3] = (1 - fraction) * np.asarray(model.mat_rgba[m][:3]) + fraction * target
            if texture is not None:
                model.mat_texid[m][ROLE_RGB] = texture
        for g in owned[name]:
            if int(model.geom_matid[g]) < 0:
                rgb = np.asarray(model.geom_rgba[g][:3])
                model.geom_rgba[g][:3] = (1 - fraction) * rgb + fraction * target
        applied[name] = {"geoms": len(owned[name]), "materials": len(materials),
                         "texture": None if texture is None else _texture_name(model, texture)}
    return {"objects": applied}


def _texture_name(model: Any, texture: int) -> str:
    """A texture's name in the compiled model (robosuite's wrapper has no lookup for it)."""
    import mujoco  # the simulator's own bindings; only reached with a built scene

    raw = getattr(model, "_model", model)
    return mujoco.mj_id2name(raw, mujoco.mjtObj.mjOBJ_TEXTURE, texture) or f"texture{texture}"


class ObjectApplied(KindApplied):
    def on_scene(self) -> None:
        env = self.stage.env
        drawn = self.draw()
        self.record = {**drawn.as_dict(),
                       "applied": recolour(env.sim, task_objects(env.env), drawn.parameters)}


class Object(Kind):
    name = "object"
    levels: ClassVar[dict[int, dict[str, float]]] = {
        # each material's colour moves toward a drawn colour by the fraction colour; at
        # texture 1 its texture is swapped for another 2D texture the scene loaded.
        1: {"colour": 0.35, "texture": 0.0},
        2: {"colour": 0.60, "texture": 0.0},
        3: {"colour": 0.60, "texture": 1.0},
        4: {"colour": 0.90, "texture": 1.0},
    }
    applied = ObjectApplied

    def parameters(self, rng: np.random.Generator, first: np.random.Generator,
                   magnitudes: Magnitudes, context: Context) -> dict[str, Any]:
        return drawn(rng, magnitudes)
