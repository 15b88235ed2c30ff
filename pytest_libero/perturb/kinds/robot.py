"""The ``robot`` kind: the arm starts from other joint positions, never in contact.

The seven joints are offset from the init state's by a drawn direction whose largest
entry is the level's offset, after the init state is installed and before the settling
controls. An offset that puts the arm in contact with anything is drawn again,
deterministically (the next attempt's seed), and every such draw is recorded.
"""

from __future__ import annotations

from typing import Any, ClassVar, Final

import numpy as np

from pytest_libero.perturb.contacts import robot_contacts
from pytest_libero.perturb.kind import Context, Kind, KindApplied, Magnitudes, Perturbation
from pytest_libero.perturb.redraw import first_standing

ROBOT_REDRAWS: Final = 20
"""How many deterministic redraws an offset that touches something may take."""


def offset_joints(sim: Any, joint_indexes: Any, perturbation: Perturbation) -> list[str]:
    """Add the drawn offsets to the arm's joints; return the contacts that follow (the
    offsets are taken back when there are any)."""
    before = np.array(sim.data.qpos[joint_indexes], dtype=np.float64)
    sim.data.qpos[joint_indexes] = before + np.asarray(perturbation.parameters["joint_offsets_rad"])
    sim.forward()
    contacts = robot_contacts(sim)
    if contacts:
        sim.data.qpos[joint_indexes] = before
        sim.forward()
    return contacts


class RobotApplied(KindApplied):
    def on_init_state(self) -> None:
        env = self.stage.env
        robot = env.env.robots[0]

        def tried(attempt: int) -> tuple[Perturbation, list[str]]:
            drawn = self.draw(attempt)
            return drawn, offset_joints(env.sim, robot._ref_joint_pos_indexes, drawn)

        drawn, touched = first_standing(
            ROBOT_REDRAWS + 1, tried, 3, lambda last: (
                f"{self.stage.entry.case_id}: every one of {ROBOT_REDRAWS + 1} drawn joint offsets "
                f"puts the arm in contact ({last}); this task has no room for robot level {self.level}"))
        # The controller's rest posture (its null-space target) moves with the arm, or the
        # settling controls would pull the offset back.
        controller = robot.controller
        controller.update_initial_joints(
            np.asarray(controller.initial_joint) + drawn.parameters["joint_offsets_rad"])
        self.record = {**drawn.as_dict(), "touched": touched}

    def on_settled(self) -> None:
        assert self.record is not None
        self.record["contacts_at_first_observation"] = robot_contacts(self.stage.env.sim)


class Robot(Kind):
    name = "robot"
    levels: ClassVar[dict[int, dict[str, float]]] = {
        1: {"offset_rad": 0.05},
        2: {"offset_rad": 0.10},
        3: {"offset_rad": 0.15},
        4: {"offset_rad": 0.20},
    }
    applied = RobotApplied

    def parameters(self, rng: np.random.Generator, first: np.random.Generator,
                   magnitudes: Magnitudes, context: Context) -> dict[str, Any]:
        direction = rng.uniform(-1.0, 1.0, 7)
        return {"joint_offsets_rad": [float(v) for v in
                                      direction / np.abs(direction).max() * magnitudes["offset_rad"]]}

    def identity_terms(self) -> dict[str, Any]:
        return {"robot_redraws": ROBOT_REDRAWS}
