"""The kinds that move or add objects (position, environment), on a LIBERO environment.

Each is applied after the init state is installed and judged after the settling
controls; the adapter's loop (``LiberoEpisode._settle_scene``) draws again when a draw
is rejected. The environment kind also changes the model before that: it adds its
distractors and textures and rebuilds the simulation once (:meth:`Environment.build`).
LIBERO is imported here only inside methods the adapter calls.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from pytest_libero.perturb.contacts import at_rest_problems, forbidden_contacts, owners, touching
from pytest_libero.perturb.draw import Perturbation, draw
from pytest_libero.perturb.environment import (
    PREFIX,
    TEXTURE_PARTS,
    candidate_objects,
    collision_geoms,
    goal_regions,
    layout,
    map_state,
    place,
    retexture,
    support_height,
    texture_files,
    upright,
)
from pytest_libero.perturb.position import displace, displacement, placements, rejections
from pytest_libero.perturb.tasks import scene_from_problem


class Position:
    """The task's movable objects on the table, moved by the level's offset."""

    def __init__(self, env: Any) -> None:
        inner = env.env
        self.env = env
        self.moved, self.kept = scene_from_problem(inner.parsed_problem).position_subjects()
        if not self.moved:
            raise ValueError("no movable task object stands on the table; the position kind "
                             f"has nothing to move ({self.kept or 'the goal names no object'})")
        self.joints = {name: inner.objects_dict[name].joints[-1] for name in self.moved}
        self.owner = owners(env.sim, {n: o.root_body for n, o in inner.objects_dict.items()},
                            {n: o.root_body for n, o in inner.fixtures_dict.items()})
        self.allowed: set[tuple[str, str]] = set()
        self.rest: dict[str, list[float]] = {}
        self.intended: dict[str, list[float]] = {}

    def context(self) -> dict[str, Any]:
        return {"objects": self.moved}

    def reference(self) -> None:
        """Told once, in the scene settled unperturbed: what touches, where things rest."""
        self.allowed = touching(self.env.sim, self.owner)
        self.rest = placements(self.env.sim, self.joints)

    def apply(self, drawn: Perturbation) -> list[str]:
        self.intended = displace(self.env.sim, self.joints, drawn)
        return []

    def judge(self, goal_holds: bool) -> list[str]:
        return rejections(self.env.sim, self.joints, self.owner, self.allowed, self.rest, goal_holds)

    def record(self) -> dict[str, Any]:
        return {"kept": self.kept, "intended_offset_m": self.intended,
                "displacement": displacement(self.rest, placements(self.env.sim, self.joints))}


class Environment:
    """Distractors from LIBERO's installed objects, and (level 2 on) other textures."""

    def __init__(self, env: Any, level: int, case: str) -> None:
        self.env = env
        self.level = level
        self.case = case
        self.names: list[str] = []
        self.layout: tuple[dict[str, tuple[int, int, int, int]], int] | None = None
        self.textures: dict[str, Any] = {}
        self._context: dict[str, Any] = {}
        self.turns: dict[str, tuple[Any, Any]] = {}
        """Each distractor's upright turn (LIBERO's rotation and its axis)."""
        self.placed: dict[str, dict[str, Any]] = {}
        self.roots: dict[str, str] = {}
        self.joints: dict[str, str] = {}
        self.owner: list[str] = []
        self.allowed: set[tuple[str, str]] = set()
        self.area = (0.0, 0.0, 0.0, 0.0)
        """Where spots are drawn: 0.15 m around every task object and fixture (x0, y0, x1, y1)."""
        self.table_z: float | None = None
        self.goal_regions: dict[str, tuple[float, float, float, float]] = {}
        """The regions the goal names, which no distractor may come near (world x0, y0, x1, y1)."""

    def build(self) -> None:
        """Add the drawn distractors and textures to the model and rebuild it once, the
        fixtures kept where the reset placed them."""
        from libero.libero import get_libero_path
        from libero.libero.envs.objects import get_object_dict, get_object_fn

        inner = self.env.env
        parsed = inner.parsed_problem
        scene = [*parsed["objects"], *parsed["fixtures"]]
        usable = []
        for category in candidate_objects(get_object_dict(), scene):
            try:
                probe = get_object_fn(category)(name=f"probe_{category}")
            except Exception:  # an object whose files the installed assets lack
                continue
            turn = (getattr(probe, "rotation", None), getattr(probe, "rotation_axis", None))
            if upright(*turn, 0.0) is not None:
                usable.append(category)
        textures_dir = Path(get_libero_path("assets")) / "textures"
        xml = inner.model.get_xml()
        in_use = {Path(f).name for f in _texture_files_of(xml)}
        self._context = {"candidates": usable,
                         "textures": [t for t in texture_files(textures_dir) if t not in in_use]}
        first = draw("environment", self.level, self.case, 0, self._context)
        objects = []
        for i, category in enumerate(first.parameters["distractors"], start=1):
            obj = get_object_fn(category)(name=f"{PREFIX}{i}_{category}")
            objects.append(obj)
            self.turns[obj.name] = (obj.rotation, obj.rotation_axis)
        self.names = [o.name for o in objects]
        sim = self.env.sim
        model = sim.model
        self.layout = (layout(model), int(model.nq))
        bodies = {model.body_id2name(b): (np.array(model.body_pos[b]), np.array(model.body_quat[b]))
                  for b in range(model.nbody)}
        inner.model.merge_objects(objects)
        xml, self.textures = retexture(inner.model.get_xml(), first.parameters["textures"], textures_dir)
        inner.reset_from_xml_string(xml)
        model = self.env.sim.model
        for name, (pos, quat) in bodies.items():
            b = model.body_name2id(name)
            model.body_pos[b], model.body_quat[b] = pos, quat
        self.env.sim.forward()
        self.roots = {o.name: o.root_body for o in objects}
        self.joints = {o.name: o.joints[-1] for o in objects}

    def install(self, state: np.ndarray) -> Any:
        """The released init state on the rebuilt model, the distractors out of the way."""
        assert self.layout is not None
        sim = self.env.sim
        old, old_nq = self.layout
        mapped = map_state(state, old, old_nq, layout(sim.model), sim.get_state().flatten(),
                           int(sim.model.nq))
        for i, joint in enumerate(self.joints.values()):
            qa, _, va, _ = layout(sim.model)[joint]
            mapped[1 + qa:1 + qa + 7] = [20.0 + i, 20.0, -5.0, 1.0, 0.0, 0.0, 0.0]
            mapped[1 + sim.model.nq + va:1 + sim.model.nq + va + 6] = 0.0
        return self.env.regenerate_obs_from_state(mapped)

    def context(self) -> dict[str, Any]:
        return self._context

    def reference(self) -> None:
        import mujoco

        inner = self.env.env
        sim = self.env.sim
        objects = {n: o.root_body for n, o in inner.objects_dict.items()}
        self.owner = owners(sim, {**objects, **self.roots},
                            {n: o.root_body for n, o in inner.fixtures_dict.items()})
        self.allowed = touching(sim, self.owner)
        points = [sim.data.body_xpos[sim.model.body_name2id(b)][:2]
                  for b in [*objects.values(), *(o.root_body for o in inner.fixtures_dict.values())]]
        xy = np.asarray(points, dtype=np.float64)
        self.area = (float(xy[:, 0].min() - 0.15), float(xy[:, 1].min() - 0.15),
                     float(xy[:, 0].max() + 0.15), float(xy[:, 1].max() + 0.15))
        self.goal_regions = goal_regions(sim, inner.object_sites_dict,
                                         inner.parsed_problem.get("goal_state", []))
        self.table_z = support_height(mujoco, sim, self.owner,
                                      [sim.data.body_xpos[sim.model.body_name2id(b)][:2]
                                       for b in objects.values()])

    def apply(self, drawn: Perturbation) -> list[str]:
        import mujoco

        if self.table_z is None:
            return ["no table found beside the task's objects"]
        sim = self.env.sim
        geoms = collision_geoms(sim.model)
        self.placed = {}
        problems = []
        for name, spots in zip(self.names, drawn.parameters["spots"]):
            mine = [g for g in geoms if self.owner[g] == name]
            others = [g for g in geoms if self.owner[g] not in (name, "support")
                      and not (self.owner[g].startswith(PREFIX) and self.owner[g] not in self.placed)]
            pose = None
            for i, spot in enumerate(spots):
                quat = upright(*self.turns[name], spot[2])
                assert quat is not None  # candidates are those with a turn it reads
                pose = place(mujoco, sim, self.joints[name], mine, others, self.owner, quat,
                             [spot], self.area, self.table_z, drawn.parameters["margin_m"],
                             list(self.goal_regions.values()))
                if pose is not None:
                    pose["spot"] = i
                    break
            if pose is None:
                problems.append(f"no spot on the table clear of everything for {name}")
                continue
            self.placed[name] = pose
        return problems

    def judge(self, goal_holds: bool) -> list[str]:
        sim = self.env.sim
        problems = [f"{name} touches {', '.join(others)}" for name, others in
                    forbidden_contacts(self.joints, touching(sim, self.owner), self.allowed).items()]
        for name, joint in self.joints.items():
            problems += [f"{name} {p}" for p in at_rest_problems(sim, joint, self.placed[name]["pos"][2])]
        if goal_holds:
            problems.append("the goal already holds")
        return problems

    def record(self) -> dict[str, Any]:
        settled = placements(self.env.sim, self.joints)
        return {"distractors": {name: {**self.placed[name],
                                       "settled_pos": [round(v, 6) for v in settled[name]]}
                                for name in self.names},
                "textures_replaced": self.textures,
                "goal_regions": {name: list(box) for name, box in self.goal_regions.items()},
                "table_z": round(float(self.table_z or 0.0), 6)}


def _texture_files_of(xml: str) -> list[str]:
    import re

    names = {n for names in TEXTURE_PARTS.values() for n in names}
    found = []
    for tag in re.findall(r"<texture\b[^>]*>", xml):
        name, file = re.search(r'name="([^"]+)"', tag), re.search(r'file="([^"]+)"', tag)
        if name and file and name.group(1) in names:
            found.append(file.group(1))
    return found
