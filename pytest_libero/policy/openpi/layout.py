"""Request layout: how an :class:`Observation` is laid out as an openpi request map.

Servers differ only in key names (openpi's LIBERO example reads "observation/image",
"observation/wrist_image", "prompt"), so a profile names the keys and nothing else
changes. The proprio vector defaults to "observation/proprio", not openpi's
"observation/state": that name means an end-effector state there, a different thing.
Constants let a profile feed a server an input it insists on but that the protocol
forbids us to send (an end-effector state, say): the constant is part of the profile,
hence of the recorded model identity.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytest_libero.policy.contract import Observation
from pytest_libero.protocol.parameters import CAMERAS

COUNTER_KEYS = ("pytest_libero/policy_calls", "pytest_libero/executed_controls")


@dataclass(frozen=True)
class RequestLayout:
    """Key names for each part of the observation, plus constant extra inputs."""

    images: Mapping[str, str] = field(
        default_factory=lambda: {
            "agentview": "observation/image",
            "robot0_eye_in_hand": "observation/wrist_image",
        }
    )
    language: str = "prompt"
    proprio: str = "observation/proprio"
    counters: bool = False
    constants: Mapping[str, np.ndarray] = field(default_factory=dict)

    def __post_init__(self) -> None:
        missing = [c for c in CAMERAS if c not in self.images]
        if missing:
            raise ValueError(f"request layout names no key for camera(s) {missing}")
        keys = [*self.images.values(), self.language, self.proprio, *self.constants]
        if self.counters:
            keys += COUNTER_KEYS
        duplicated = sorted({k for k in keys if keys.count(k) > 1})
        if duplicated:
            raise ValueError(f"uses the key(s) {duplicated} for more than one input")

    def encode(self, observation: Observation) -> dict[str, Any]:
        """The request map for one observation: only what P5 allows, plus constants."""
        request: dict[str, Any] = {
            key: observation.images[camera] for camera, key in self.images.items()
        }
        request[self.language] = observation.language
        if observation.proprio is not None:
            request[self.proprio] = observation.proprio
        for key, value in self.constants.items():
            request[key] = value
        if self.counters:
            request[COUNTER_KEYS[0]] = observation.policy_calls
            request[COUNTER_KEYS[1]] = observation.executed_controls
        return request

    def decode(self, request: Mapping[str, Any]) -> Observation:
        """The server side: rebuild the observation a served policy receives."""
        missing = [k for k in (*self.images.values(), self.language) if k not in request]
        if missing:
            raise KeyError(f"request lacks {missing}; it has {sorted(map(str, request))}")
        proprio = request.get(self.proprio)
        return Observation(
            language=str(request[self.language]),
            images={camera: np.asarray(request[key]) for camera, key in self.images.items()},
            proprio=None if proprio is None else np.asarray(proprio, dtype=np.float64),
            policy_calls=int(request.get(COUNTER_KEYS[0], 0)),
            executed_controls=int(request.get(COUNTER_KEYS[1], 0)),
        )

    def describe(self) -> dict[str, Any]:
        return {
            "images": dict(self.images),
            "language": self.language,
            "proprio": self.proprio,
            "counters": self.counters,
            "constants": {
                k: {"dtype": str(v.dtype), "shape": list(v.shape), "values": v.tolist()}
                for k, v in self.constants.items()
            },
        }
