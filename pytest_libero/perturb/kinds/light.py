"""The ``light`` kind: every scene light changed, the physics untouched.

Each light's diffuse intensity is scaled by 1 +- intensity, its direction tilted by
tilt_deg toward a drawn heading, each colour channel scaled by up to 1 +- tint, and
ambient light added or removed; the headlight too. Applied to the compiled model after
the episode's reset.
"""

from __future__ import annotations

import math
from typing import Any, ClassVar

import numpy as np

from pytest_libero.perturb.kind import Context, Kind, KindApplied, Magnitudes, Perturbation
from pytest_libero.perturb.rotations import about_axis


def change_lights(sim: Any, perturbation: Perturbation) -> dict[str, Any]:
    """Scale, tint and tilt every scene light and shift the ambient light (the headlight
    too); return the values after (recorded)."""
    p = perturbation.parameters
    model = sim.model
    tint = np.asarray(p["tint"])
    toward = math.radians(p["tilt_toward_deg"])
    axis = np.array([math.cos(toward), math.sin(toward), 0.0])
    tilt = about_axis(axis, p["tilt_deg"])
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


class LightApplied(KindApplied):
    def on_scene(self) -> None:
        drawn = self.draw()
        self.record = {**drawn.as_dict(), "applied": change_lights(self.stage.env.sim, drawn)}


class Light(Kind):
    name = "light"
    levels: ClassVar[dict[int, dict[str, float]]] = {
        1: {"intensity": 0.15, "tilt_deg": 8.0, "tint": 0.05, "ambient": 0.05},
        2: {"intensity": 0.30, "tilt_deg": 15.0, "tint": 0.10, "ambient": 0.10},
        3: {"intensity": 0.45, "tilt_deg": 25.0, "tint": 0.15, "ambient": 0.15},
        4: {"intensity": 0.60, "tilt_deg": 35.0, "tint": 0.20, "ambient": 0.20},
    }
    applied = LightApplied

    def parameters(self, rng: np.random.Generator, first: np.random.Generator,
                   magnitudes: Magnitudes, context: Context) -> dict[str, Any]:
        signs = rng.choice([-1.0, 1.0], size=2)
        return {
            "intensity_factor": 1.0 + signs[0] * magnitudes["intensity"],
            "tilt_deg": magnitudes["tilt_deg"],
            "tilt_toward_deg": float(rng.uniform(0.0, 360.0)),
            "tint": [float(1.0 + t) for t in rng.uniform(-magnitudes["tint"], magnitudes["tint"], 3)],
            "ambient_shift": signs[1] * magnitudes["ambient"],
        }
