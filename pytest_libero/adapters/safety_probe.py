"""Samples the safety signals from a LIBERO environment after each policy control.

Reads simulator state only (body poses, contacts, the end-effector site); it never
writes to the simulation and nothing it reads reaches the policy. The task objects are
LIBERO's movable objects (``objects_dict``; fixtures and the table are not task
objects); goal objects are those the BDDL goal names, or LIBERO's objects of interest.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from pytest_libero.safety.signals import Signals

ROBOT_PREFIXES = ("robot0_", "gripper0_", "mount0_")
UP = np.array([0.0, 0.0, 1.0])


def _rotate(q: np.ndarray, v: np.ndarray) -> np.ndarray:
    """``v`` rotated by the unit quaternion ``q`` (w, x, y, z)."""
    w, u = q[0], q[1:]
    return np.asarray(v + 2 * w * np.cross(u, v) + 2 * np.cross(u, np.cross(u, v)))


def _conjugate(q: np.ndarray) -> np.ndarray:
    return np.array([q[0], -q[1], -q[2], -q[3]])


class SafetyProbe:
    """Baseline after settling, then one row of signals per :meth:`sample`.

    Contacts are gathered at every physics substep (robosuite runs 25 per control):
    a push can start and end between two controls, and the object slides on.
    """

    def __init__(self, robosuite_env: Any) -> None:
        env = robosuite_env
        self.sim = env.sim
        model = self.sim.model
        self.objects = tuple(env.objects_dict)
        named = {str(arg) for predicate in env.parsed_problem.get("goal_state", [])
                 for arg in predicate[1:]}
        interest = set(getattr(env, "obj_of_interest", []) or [])
        self.goal = tuple(name in named or name in interest for name in self.objects)
        self.body_ids = np.array([env.obj_body_id[name] for name in self.objects], dtype=int)
        n = len(self.objects)
        root_column = {int(model.body_rootid[b]): column for column, b in enumerate(self.body_ids)}
        geom_body = np.asarray(model.geom_bodyid)
        self.geom_column = np.array(
            [root_column.get(int(model.body_rootid[b]), n) for b in geom_body], dtype=int)
        robot = np.array([(model.body_id2name(int(b)) or "").startswith(ROBOT_PREFIXES)
                          for b in geom_body], dtype=bool)
        gripper = env.robots[0].gripper
        finger = np.zeros((2, len(geom_body)), dtype=bool)
        for side, key in enumerate(("left_finger", "right_finger")):
            for name in gripper.important_geoms[key]:
                finger[side, model.geom_name2id(name)] = True
        self.robot_geom, self.finger_geom = robot, finger
        self.eef_site = env.robots[0].eef_site_id
        data = self.sim.data
        self.start_pos = np.array(data.body_xpos[self.body_ids], dtype=np.float64)
        self.start_quat = np.array(data.body_xquat[self.body_ids], dtype=np.float64)
        # The direction in each object's own frame that pointed up once it settled.
        self.own_up = [_rotate(_conjugate(q), UP) for q in self.start_quat]
        self.support = float(self.start_pos[:, 2].min()) if n else 0.0
        self.rows: list[np.ndarray] = []
        self.seconds = 0.0
        """Time spent in the monitor itself (contact scans and rows): its cost."""
        self._touched = np.zeros(n + 1, dtype=bool)  # the extra column: not a task object
        self._held = np.zeros((2, n + 1), dtype=bool)
        raw = getattr(data, "_data", data)
        step = self.sim.step

        def step_and_look() -> None:
            step()
            started = time.perf_counter()
            count = int(raw.ncon)
            if count:
                g1 = np.asarray(raw.contact.geom1[:count])
                g2 = np.asarray(raw.contact.geom2[:count])
                for mine, other in ((g1, g2), (g2, g1)):
                    hit = self.robot_geom[mine]
                    self._touched[self.geom_column[other[hit]]] = True
                    for side in (0, 1):
                        held = self.finger_geom[side, mine]
                        self._held[side, self.geom_column[other[held]]] = True
            self.seconds += time.perf_counter() - started

        self.sim.step = step_and_look

    def sample(self) -> None:
        """One row after a control: (displacement, tilt, rotation, height, contact,
        grasp, reach) per object; contact and grasp over the control's substeps."""
        started = time.perf_counter()
        data = self.sim.data
        pos = np.asarray(data.body_xpos[self.body_ids], dtype=np.float64)
        quat = np.asarray(data.body_xquat[self.body_ids], dtype=np.float64)
        n = len(self.objects)
        row = np.zeros((7, n))
        row[0] = np.linalg.norm(pos - self.start_pos, axis=1)
        for j in range(n):
            up = _rotate(quat[j], self.own_up[j])
            row[1, j] = float(np.degrees(np.arccos(np.clip(np.dot(up, UP), -1.0, 1.0))))
            overlap = abs(float(np.dot(quat[j], self.start_quat[j])))
            row[2, j] = float(np.degrees(2 * np.arccos(min(1.0, overlap))))
        row[3] = pos[:, 2]
        row[4] = self._touched[:n]
        row[5] = self._held[0, :n] & self._held[1, :n]
        row[6] = np.linalg.norm(pos - np.asarray(data.site_xpos[self.eef_site]), axis=1)
        self._touched[:] = False
        self._held[:] = False
        self.rows.append(row)
        self.seconds += time.perf_counter() - started

    def signals(self) -> Signals:
        rows = np.stack(self.rows) if self.rows else np.zeros((0, 7, len(self.objects)))
        column = {name: rows[:, i, :] for i, name in enumerate(
            ("displacement_m", "tilt_deg", "rotation_deg", "height_m", "contact", "grasp", "reach_m"))}
        return Signals(
            objects=self.objects, goal=self.goal, support_m=self.support,
            displacement_m=column["displacement_m"].astype(np.float32),
            tilt_deg=column["tilt_deg"].astype(np.float32),
            rotation_deg=column["rotation_deg"].astype(np.float32),
            height_m=column["height_m"].astype(np.float32),
            contact=column["contact"].astype(bool),
            grasp=column["grasp"].astype(bool),
            reach_m=column["reach_m"].astype(np.float32),
        )
