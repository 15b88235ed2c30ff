"""Applying a drawn perturbation to a built LIBERO scene, and to delivered images.

The adapter hands in its robosuite environment; nothing here imports the simulator.
Camera and light changes edit the compiled model (a hard reset recompiles it, so they
are applied after the episode's own reset); the robot offset edits the joint positions
after the init state is installed and before the settling controls; noise corrupts the
images the policy is given, never the simulator's.
"""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np

from pytest_libero.perturb.draw import Perturbation

CAMERA = "agentview"
ROBOT_PREFIXES = ("robot0_", "gripper0_")


def _rotation(axis: np.ndarray, degrees: float) -> np.ndarray:
    """Rotation matrix about a unit ``axis`` (Rodrigues)."""
    x, y, z = axis / np.linalg.norm(axis)
    a = math.radians(degrees)
    c, s, t = math.cos(a), math.sin(a), 1 - math.cos(a)
    return np.array([[t * x * x + c, t * x * y - s * z, t * x * z + s * y],
                     [t * x * y + s * z, t * y * y + c, t * y * z - s * x],
                     [t * x * z - s * y, t * y * z + s * x, t * z * z + c]])


def _quat_to_matrix(q: np.ndarray) -> np.ndarray:
    w, x, y, z = q / np.linalg.norm(q)
    return np.array([[1 - 2 * (y * y + z * z), 2 * (x * y - z * w), 2 * (x * z + y * w)],
                     [2 * (x * y + z * w), 1 - 2 * (x * x + z * z), 2 * (y * z - x * w)],
                     [2 * (x * z - y * w), 2 * (y * z + x * w), 1 - 2 * (x * x + y * y)]])


def _matrix_to_quat(r: np.ndarray) -> np.ndarray:
    """MuJoCo's (w, x, y, z) quaternion of a rotation matrix, w >= 0."""
    w = math.sqrt(max(0.0, 1 + r[0, 0] + r[1, 1] + r[2, 2])) / 2
    x = math.copysign(math.sqrt(max(0.0, 1 + r[0, 0] - r[1, 1] - r[2, 2])) / 2, r[2, 1] - r[1, 2])
    y = math.copysign(math.sqrt(max(0.0, 1 - r[0, 0] + r[1, 1] - r[2, 2])) / 2, r[0, 2] - r[2, 0])
    z = math.copysign(math.sqrt(max(0.0, 1 - r[0, 0] - r[1, 1] + r[2, 2])) / 2, r[1, 0] - r[0, 1])
    q = np.array([w, x, y, z])
    unit: np.ndarray = q / np.linalg.norm(q)
    return unit


def move_camera(sim: Any, perturbation: Perturbation) -> dict[str, Any]:
    """Orbit the agentview camera about where its optical axis meets the plane of the task
    objects; return the pose before and after (recorded)."""
    p = perturbation.parameters
    model, data = sim.model, sim.data
    cid = model.camera_name2id(CAMERA)
    if model.cam_bodyid[cid] != 0:
        raise ValueError(f"the {CAMERA} camera is not fixed to the world; cannot move it")
    pos, quat = np.array(model.cam_pos[cid], dtype=np.float64), np.array(model.cam_quat[cid])
    frame = _quat_to_matrix(quat)
    forward = -frame[:, 2]
    objects = [data.xpos[i][2] for i in range(model.nbody) if model.body_id2name(i).endswith("_main")]
    plane = float(np.mean(objects)) if objects else pos[2] - 0.5
    reach = (pos[2] - plane) / -forward[2] if forward[2] < -1e-6 else 1.0
    pivot = pos + min(max(reach, 0.2), 3.0) * forward
    offset = pos - pivot
    up = np.array([0.0, 0.0, 1.0])
    side = np.cross(offset, up)
    turn = _rotation(side, p["elevation_deg"]) @ _rotation(up, p["azimuth_deg"])
    new_pos = pivot + turn @ offset * p["distance_factor"]
    new_frame = turn @ frame
    new_frame = _rotation(-new_frame[:, 2], p["roll_deg"]) @ new_frame
    model.cam_pos[cid] = new_pos
    model.cam_quat[cid] = _matrix_to_quat(new_frame)
    return {"pivot": [round(float(v), 6) for v in pivot],
            "before": {"pos": [float(v) for v in pos], "quat": [float(v) for v in quat]},
            "after": {"pos": [float(v) for v in model.cam_pos[cid]],
                      "quat": [float(v) for v in model.cam_quat[cid]]}}


def change_lights(sim: Any, perturbation: Perturbation) -> dict[str, Any]:
    """Scale, tint and tilt every scene light and shift the ambient light (the headlight
    too); return the values after (recorded)."""
    p = perturbation.parameters
    model = sim.model
    tint = np.asarray(p["tint"])
    toward = math.radians(p["tilt_toward_deg"])
    axis = np.array([math.cos(toward), math.sin(toward), 0.0])
    tilt = _rotation(axis, p["tilt_deg"])
    for i in range(model.nlight):
        model.light_diffuse[i] = np.clip(model.light_diffuse[i] * p["intensity_factor"] * tint, 0, 1)
        direction = tilt @ np.asarray(model.light_dir[i], dtype=np.float64)
        model.light_dir[i] = direction / np.linalg.norm(direction)
        model.light_ambient[i] = np.clip(model.light_ambient[i] + p["ambient_shift"], 0, 1)
    headlight = model.vis.headlight
    headlight.diffuse[:] = np.clip(np.asarray(headlight.diffuse) * p["intensity_factor"] * tint, 0, 1)
    headlight.ambient[:] = np.clip(np.asarray(headlight.ambient) + p["ambient_shift"], 0, 1)
    return {"lights": int(model.nlight),
            "diffuse": [[float(v) for v in model.light_diffuse[i]] for i in range(model.nlight)],
            "dir": [[float(v) for v in model.light_dir[i]] for i in range(model.nlight)],
            "headlight": {"diffuse": [float(v) for v in headlight.diffuse],
                          "ambient": [float(v) for v in headlight.ambient]}}


def robot_contacts(sim: Any) -> list[str]:
    """Contacts that involve the arm or its gripper, as "geom - geom" names."""
    model, data = sim.model, sim.data
    found = []
    for j in range(data.ncon):
        contact = data.contact[j]
        names = [model.geom_id2name(g) or f"geom{g}" for g in (contact.geom1, contact.geom2)]
        if any(n.startswith(ROBOT_PREFIXES) for n in names):
            found.append(" - ".join(names))
    return found


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


def corrupt(image: np.ndarray, perturbation: Perturbation, rng: np.random.Generator) -> np.ndarray:
    """Gaussian noise of the level's sigma, then JPEG at its quality, on a uint8 image."""
    from PIL import Image  # Pillow comes with robosuite; imported only for noise cases

    p = perturbation.parameters
    noisy = image.astype(np.float64) + rng.normal(0.0, p["sigma"], image.shape)
    out = np.clip(np.rint(noisy), 0, 255).astype(np.uint8)
    if p["jpeg_quality"] < 100:
        buffer = io.BytesIO()
        Image.fromarray(out).save(buffer, format="JPEG", quality=int(p["jpeg_quality"]))
        out = np.asarray(Image.open(io.BytesIO(buffer.getvalue())).convert("RGB"), dtype=np.uint8)
    return np.ascontiguousarray(out)
