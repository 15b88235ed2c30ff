"""The ``camera`` kind: the agentview camera orbits the task, nothing else changes.

The camera turns about the point where its optical axis meets the plane of the task
objects: azimuth and elevation in degrees, a distance factor, and a roll about its own
axis. The wrist camera and the physics are untouched. Applied to the compiled model
after the episode's reset (a hard reset recompiles it).
"""

from __future__ import annotations

from typing import Any, ClassVar

import numpy as np

from pytest_libero.perturb.kind import Context, Kind, KindApplied, Magnitudes, Perturbation
from pytest_libero.perturb.rotations import about_axis, matrix_to_quat, quat_to_matrix

CAMERA = "agentview"


def move_camera(sim: Any, perturbation: Perturbation) -> dict[str, Any]:
    """Orbit the agentview camera about where its optical axis meets the plane of the task
    objects; return the pose before and after (recorded)."""
    p = perturbation.parameters
    model, data = sim.model, sim.data
    cid = model.camera_name2id(CAMERA)
    if model.cam_bodyid[cid] != 0:
        raise ValueError(f"the {CAMERA} camera is not fixed to the world; cannot move it")
    pos, quat = np.array(model.cam_pos[cid], dtype=np.float64), np.array(model.cam_quat[cid])
    frame = quat_to_matrix(quat)
    forward = -frame[:, 2]
    objects = [data.xpos[i][2] for i in range(model.nbody) if model.body_id2name(i).endswith("_main")]
    plane = float(np.mean(objects)) if objects else pos[2] - 0.5
    reach = (pos[2] - plane) / -forward[2] if forward[2] < -1e-6 else 1.0
    pivot = pos + min(max(reach, 0.2), 3.0) * forward
    offset = pos - pivot
    up = np.array([0.0, 0.0, 1.0])
    side = np.cross(offset, up)
    turn = about_axis(side, p["elevation_deg"]) @ about_axis(up, p["azimuth_deg"])
    new_pos = pivot + turn @ offset * p["distance_factor"]
    new_frame = turn @ frame
    new_frame = about_axis(-new_frame[:, 2], p["roll_deg"]) @ new_frame
    model.cam_pos[cid] = new_pos
    model.cam_quat[cid] = matrix_to_quat(new_frame)
    return {"pivot": [round(float(v), 6) for v in pivot],
            "before": {"pos": [float(v) for v in pos], "quat": [float(v) for v in quat]},
            "after": {"pos": [float(v) for v in model.cam_pos[cid]],
                      "quat": [float(v) for v in model.cam_quat[cid]]}}


class CameraApplied(KindApplied):
    def on_scene(self) -> None:
        drawn = self.draw()
        self.record = {**drawn.as_dict(), "applied": move_camera(self.stage.env.sim, drawn)}


class Camera(Kind):
    name = "camera"
    levels: ClassVar[dict[int, dict[str, float]]] = {
        1: {"azimuth_deg": 4.0, "elevation_deg": 2.0, "distance": 0.04, "roll_deg": 2.0},
        2: {"azimuth_deg": 8.0, "elevation_deg": 4.0, "distance": 0.08, "roll_deg": 4.0},
        3: {"azimuth_deg": 15.0, "elevation_deg": 7.0, "distance": 0.15, "roll_deg": 7.0},
        4: {"azimuth_deg": 25.0, "elevation_deg": 10.0, "distance": 0.25, "roll_deg": 10.0},
    }
    applied = CameraApplied

    def parameters(self, rng: np.random.Generator, first: np.random.Generator,
                   magnitudes: Magnitudes, context: Context) -> dict[str, Any]:
        signs = rng.choice([-1.0, 1.0], size=4)
        return {
            "azimuth_deg": signs[0] * magnitudes["azimuth_deg"],
            "elevation_deg": signs[1] * magnitudes["elevation_deg"],
            "distance_factor": 1.0 + signs[2] * magnitudes["distance"],
            "roll_deg": signs[3] * magnitudes["roll_deg"],
        }
