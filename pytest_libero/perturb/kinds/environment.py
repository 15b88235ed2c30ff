"""The ``environment`` kind: distractors from LIBERO's installed objects and, from level 2
on, other textures for the table, the floor and the walls.

After the episode's reset the drawn distractors join the task's model (LIBERO's own
object classes) and the scene is rebuilt once, the fixtures kept where the reset put
them (:meth:`EnvironmentApplied.on_scene`); the released init state is installed on that
model joint by joint, so every task object starts where it does natively. Each
distractor stands on the first drawn spot clear of everything by the margin and of
every region the goal names (perturb/tabletop.py); after settling a draw is rejected
when a distractor touches anything but the table, fell or still moves
(perturb/settling.py draws again).

Whether a task's table takes the level's distractors is known only by trying, so
``release/build_environment_room.py`` set up every native task at every level once and
froze the cases whose every draw was rejected (:func:`room_table`); collection skips
those with the measured reason. A table measured under other draws is refused.
"""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any, Final

import numpy as np

from pytest_libero.data import ENVIRONMENT_ROOM_FILE
from pytest_libero.perturb import settling
from pytest_libero.perturb.contacts import at_rest_problems, forbidden_contacts, owners, touching
from pytest_libero.perturb.kind import (
    GENERATOR,
    PERTURB_SEED,
    Context,
    Kind,
    Magnitudes,
    Perturbation,
    Stage,
)
from pytest_libero.perturb.kinds.position import placements
from pytest_libero.perturb.settling import SettledApplied
from pytest_libero.perturb.tabletop import (
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
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.shipped import need, reading, shipped_json

if TYPE_CHECKING:
    from pytest_libero.catalog.entries import Entry

PLACEMENT_SAMPLES: Final = 24
"""How many (u, v, yaw) spots are drawn per distractor; the first one clear of
everything by the margin is used."""
ROOM_SCHEMA: Final = "pytest-libero/environment-room/1"
ROOM_BUILDER: Final = "release/build_environment_room.py"
LEVELS: Final[dict[int, dict[str, float]]] = {
    1: {"distractors": 1.0, "textures": 0.0, "margin_m": 0.04},
    2: {"distractors": 2.0, "textures": 1.0, "margin_m": 0.04},
    3: {"distractors": 3.0, "textures": 1.0, "margin_m": 0.04},
    4: {"distractors": 4.0, "textures": 1.0, "margin_m": 0.04},
}
"""Distractors: how many objects join; textures 1: the table, floor and walls retextured."""


def draw_basis() -> dict[str, Any]:
    """What an environment case's set-up depends on besides the task: the generator, the
    seed, the redraw bound, the settling limits and the kind's level table."""
    return {"generator": GENERATOR, "seed": PERTURB_SEED, **settling.identity_terms(),
            "environment": {str(level): dict(p) for level, p in LEVELS.items()}}


@cache
def room_table() -> dict[str, Any]:
    """The committed table: ``checked`` (task case ids), ``levels``, ``no_room``
    (``<task>~environment<N>`` -> the set-up's reason) and what it was measured with."""
    table = shipped_json(ENVIRONMENT_ROOM_FILE, ROOM_SCHEMA)  # a damaged one: reinstall
    with reading(ENVIRONMENT_ROOM_FILE):
        need(table, "checked", list)
        need(table, "levels", list)
        for key, reason in need(table, "no_room", dict).items():
            need({key: reason}, key, str, "no_room.")
    if table.get("draw_basis") != draw_basis():
        raise SetupError(f"{ENVIRONMENT_ROOM_FILE} was measured under other environment draws "
                         "(generator, seed, redraws or level table changed): rebuild it with "
                         f"MUJOCO_GL=egl python {ROOM_BUILDER}")
    return table


def no_room(task: str, level: int) -> str | None:
    """Why the kind at ``level`` has no room on task ``task`` (its fast-mode case id), as
    measured; None when it was set up, or the task was not measured."""
    reason = room_table()["no_room"].get(f"{task}~environment{level}")
    return None if reason is None else str(reason)


class EnvironmentApplied(SettledApplied):
    """Distractors and textures on one episode's scene."""

    def __init__(self, kind: Kind, level: int, stage: Stage) -> None:
        super().__init__(kind, level, stage)
        self.names: list[str] = []
        self.layout: tuple[dict[str, tuple[int, int, int, int]], int] | None = None
        self.textures: dict[str, Any] = {}
        self._context: dict[str, Any] = {}
        self.turns: dict[str, tuple[Any, Any]] = {}
        """Each distractor's upright turn (LIBERO's rotation and its axis)."""
        self.placements: dict[str, dict[str, Any]] = {}
        self.roots: dict[str, str] = {}
        self.joints: dict[str, str] = {}
        self.owner: list[str] = []
        self.allowed: set[tuple[str, str]] = set()
        self.area = (0.0, 0.0, 0.0, 0.0)
        """Where spots are drawn: 0.15 m around every task object and fixture (x0, y0, x1, y1)."""
        self.table_z: float | None = None
        self.goal_regions: dict[str, tuple[float, float, float, float]] = {}
        """The regions the goal names, which no distractor may come near (world x0, y0, x1, y1)."""

    def on_scene(self) -> None:
        """Add the drawn distractors and textures to the model and rebuild it once, the
        fixtures kept where the reset placed them."""
        from libero.libero import get_libero_path
        from libero.libero.envs.objects import get_object_dict, get_object_fn

        env = self.stage.env
        inner = env.env
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
        in_use = {Path(f).name for f in _texture_files_of(inner.model.get_xml())}
        self._context = {"candidates": usable,
                         "textures": [t for t in texture_files(textures_dir) if t not in in_use]}
        first = self.draw(0, self._context)
        objects = []
        for i, category in enumerate(first.parameters["distractors"], start=1):
            obj = get_object_fn(category)(name=f"{PREFIX}{i}_{category}")
            objects.append(obj)
            self.turns[obj.name] = (obj.rotation, obj.rotation_axis)
        self.names = [o.name for o in objects]
        model = env.sim.model
        self.layout = (layout(model), int(model.nq))
        bodies = {model.body_id2name(b): (np.array(model.body_pos[b]), np.array(model.body_quat[b]))
                  for b in range(model.nbody)}
        inner.model.merge_objects(objects)
        xml, self.textures = retexture(inner.model.get_xml(), first.parameters["textures"], textures_dir)
        inner.reset_from_xml_string(xml)
        model = env.sim.model
        for name, (pos, quat) in bodies.items():
            b = model.body_name2id(name)
            model.body_pos[b], model.body_quat[b] = pos, quat
        env.sim.forward()
        self.roots = {o.name: o.root_body for o in objects}
        self.joints = {o.name: o.joints[-1] for o in objects}

    def install(self, state: np.ndarray) -> Any:
        """The released init state on the rebuilt model, the distractors out of the way."""
        assert self.layout is not None
        env = self.stage.env
        sim = env.sim
        old, old_nq = self.layout
        mapped = map_state(state, old, old_nq, layout(sim.model), sim.get_state().flatten(),
                           int(sim.model.nq))
        for i, joint in enumerate(self.joints.values()):
            qa, _, va, _ = layout(sim.model)[joint]
            mapped[1 + qa:1 + qa + 7] = [20.0 + i, 20.0, -5.0, 1.0, 0.0, 0.0, 0.0]
            mapped[1 + sim.model.nq + va:1 + sim.model.nq + va + 6] = 0.0
        return env.regenerate_obs_from_state(mapped)

    def context(self) -> Context:
        return self._context

    def reference(self) -> None:
        import mujoco

        inner = self.stage.env.env
        sim = self.stage.env.sim
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
        sim = self.stage.env.sim
        geoms = collision_geoms(sim.model)
        self.placements = {}
        problems = []
        for name, spots in zip(self.names, drawn.parameters["spots"]):
            mine = [g for g in geoms if self.owner[g] == name]
            others = [g for g in geoms if self.owner[g] not in (name, "support")
                      and not (self.owner[g].startswith(PREFIX) and self.owner[g] not in self.placements)]
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
            self.placements[name] = pose
        return problems

    def judge(self, goal_holds: bool) -> list[str]:
        sim = self.stage.env.sim
        problems = [f"{name} touches {', '.join(others)}" for name, others in
                    forbidden_contacts(self.joints, touching(sim, self.owner), self.allowed).items()]
        for name, joint in self.joints.items():
            problems += [f"{name} {p}" for p in
                         at_rest_problems(sim, joint, self.placements[name]["pos"][2])]
        if goal_holds:
            problems.append("the goal already holds")
        return problems

    def placed(self) -> dict[str, Any]:
        settled = placements(self.stage.env.sim, self.joints)
        return {"distractors": {name: {**self.placements[name],
                                       "settled_pos": [round(v, 6) for v in settled[name]]}
                                for name in self.names},
                "textures_replaced": self.textures,
                "goal_regions": {name: list(box) for name, box in self.goal_regions.items()},
                "table_z": round(float(self.table_z or 0.0), 6)}


def _texture_files_of(xml: str) -> list[str]:
    names = {n for names in TEXTURE_PARTS.values() for n in names}
    found = []
    for tag in re.findall(r"<texture\b[^>]*>", xml):
        name, file = re.search(r'name="([^"]+)"', tag), re.search(r'file="([^"]+)"', tag)
        if name and file and name.group(1) in names:
            found.append(file.group(1))
    return found


class Environment(Kind):
    name = "environment"
    levels = LEVELS
    applied = EnvironmentApplied

    def parameters(self, rng: np.random.Generator, first: np.random.Generator,
                   magnitudes: Magnitudes, context: Context) -> dict[str, Any]:
        """Which installed objects join the scene and, from level 2 on, which installed
        texture the table, the floor and the walls get (drawn by the first attempt's
        generator: the scene is built once), and where each object may stand (fractions of
        the area around the task, resolved by perturb/tabletop.py; redrawn per attempt)."""
        candidates = sorted(context.get("candidates", ()))
        count = int(magnitudes["distractors"])
        if len(candidates) < count:
            raise ValueError(f"{count} distractors asked, {len(candidates)} installed objects left")
        chosen = [candidates[i] for i in first.choice(len(candidates), size=count, replace=False)]
        textures: dict[str, str] = {}
        if magnitudes["textures"]:
            names = sorted(context.get("textures", ()))
            picked = first.choice(len(names), size=3, replace=False)
            textures = {part: names[i] for part, i in zip(("table", "floor", "wall"), picked)}
        spots = rng.uniform(0.0, 1.0, (count, PLACEMENT_SAMPLES, 3))
        return {"distractors": chosen, "margin_m": magnitudes["margin_m"],
                "spots": [[[round(float(u), 6), round(float(v), 6), round(float(w) * 360.0, 4)]
                           for u, v, w in row] for row in spots],
                "textures": textures}

    def identity_terms(self) -> dict[str, Any]:
        return settling.identity_terms()

    def not_applicable(self, entry: Entry, level: int) -> str | None:
        reason = no_room(entry.task_id, level)
        if reason is None:
            return None
        return (f"environment cannot apply at level {level}: the table has no room ({reason}; "
                f"measured on the task's fast-mode init state by {ROOM_BUILDER})")
