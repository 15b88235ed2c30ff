"""The ``noise`` kind: the delivered images are corrupted, the simulator never is.

Both delivered images, after the native flip, get Gaussian noise of the level's sigma
(on the 0-255 scale), drawn afresh for every policy call from its own generator, then
JPEG compression at the level's quality (100: none).
"""

from __future__ import annotations

import io
from typing import Any, ClassVar, Final

import numpy as np

from pytest_libero.perturb.kind import (
    Context,
    Kind,
    KindApplied,
    Magnitudes,
    Perturbation,
    Stage,
    generator,
    seed_of,
)

NOISE_CAMERAS: Final = ("agentview", "robot0_eye_in_hand")
"""Which delivered images are corrupted: both."""


def noise_generator(perturbation: Perturbation, policy_call: int) -> np.random.Generator:
    """The noise of one delivery: its own generator per (case, policy call)."""
    return generator(seed_of(perturbation.seed, "call", policy_call))


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


class NoiseApplied(KindApplied):
    def __init__(self, kind: Kind, level: int, stage: Stage) -> None:
        super().__init__(kind, level, stage)
        self.drawn = self.draw()
        self.record = self.drawn.as_dict()

    def deliver(self, images: dict[str, np.ndarray], policy_call: int) -> dict[str, np.ndarray]:
        rng = noise_generator(self.drawn, policy_call)
        return {camera: corrupt(image, self.drawn, rng) if camera in NOISE_CAMERAS else image
                for camera, image in images.items()}


class Noise(Kind):
    name = "noise"
    levels: ClassVar[dict[int, dict[str, float]]] = {
        1: {"sigma": 3.0, "jpeg_quality": 90.0},
        2: {"sigma": 6.0, "jpeg_quality": 70.0},
        3: {"sigma": 10.0, "jpeg_quality": 50.0},
        4: {"sigma": 16.0, "jpeg_quality": 30.0},
    }
    applied = NoiseApplied

    def parameters(self, rng: np.random.Generator, first: np.random.Generator,
                   magnitudes: Magnitudes, context: Context) -> dict[str, Any]:
        return {"sigma": magnitudes["sigma"], "jpeg_quality": int(magnitudes["jpeg_quality"])}

    def identity_terms(self) -> dict[str, Any]:
        return {"noise_cameras": list(NOISE_CAMERAS)}
