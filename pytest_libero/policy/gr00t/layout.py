"""How an :class:`Observation` becomes a GR00T request, and a GR00T reply an action chunk.

A profile names every key (profiles with ``transport = "gr00t"``): which request key
carries which camera, the instruction key, whether arrays get a batch and a time axis
(GR00T's LIBERO recipe wants (B, T, ...) with B = T = 1), the constants sent under the
state keys the protocol cannot fill, and which reply keys form the 7 action columns in
order, with a named gripper transform. No code lives in a profile: a transform is a name
looked up in :data:`GRIPPER_TRANSFORMS`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from pytest_libero.policy.contract import Observation, refuse_non_floats
from pytest_libero.protocol.errors import InvalidAction
from pytest_libero.protocol.parameters import ACTION_DIM, CAMERAS


def _gr00t_libero(gripper: np.ndarray) -> np.ndarray:
    """GR00T's gripper in [0, 1] (1 = open) to LIBERO's (-1 open, +1 close), as
    GR00T's own LIBERO loop maps it: 2g - 1, its sign, negated."""
    result: np.ndarray = -np.sign(2.0 * gripper - 1.0)
    return result


GRIPPER_TRANSFORMS: Mapping[str, Callable[[np.ndarray], np.ndarray]] = {
    "none": lambda gripper: gripper,
    "gr00t_libero": _gr00t_libero,
}


@dataclass(frozen=True)
class Gr00tLayout:
    """Request keys and axes, state constants, and the reply mapping."""

    images: Mapping[str, str]
    language: str
    actions: Sequence[str]
    """The reply keys whose values form action columns 0..6, in order."""
    gripper: str = "none"
    batch: bool = True
    time: bool = True
    state: Mapping[str, np.ndarray] = field(default_factory=dict)
    """Constant per state key, as the profile (or a policy option) declares it."""

    def __post_init__(self) -> None:
        missing = [c for c in CAMERAS if c not in self.images]
        if missing:
            raise ValueError(f"names no request key for camera(s) {missing}")
        keys = [*self.images.values(), self.language, *self.state]
        duplicated = sorted({k for k in keys if keys.count(k) > 1})
        if duplicated:
            raise ValueError(f"uses the key(s) {duplicated} for more than one input")
        if len(self.actions) != ACTION_DIM or len(set(self.actions)) != ACTION_DIM:
            raise ValueError(f"names {len(self.actions)} reply keys; the action needs "
                             f"{ACTION_DIM} distinct ones (x y z roll pitch yaw gripper)")
        if self.gripper not in GRIPPER_TRANSFORMS:
            raise ValueError(f"gripper transform {self.gripper!r} is not one of "
                             f"{', '.join(GRIPPER_TRANSFORMS)}")

    def _axes(self, array: np.ndarray) -> np.ndarray:
        lead = (1,) * (int(self.batch) + int(self.time))
        return np.ascontiguousarray(array.reshape(lead + array.shape))

    def encode(self, observation: Observation) -> dict[str, Any]:
        """The ``observation`` map of one get_action request: images, instruction,
        state constants; nothing else (P5)."""
        request: dict[str, Any] = {
            key: self._axes(observation.images[camera]) for camera, key in self.images.items()
        }
        request[self.language] = [observation.language] if self.batch else observation.language
        for key, value in self.state.items():
            request[key] = self._axes(value)
        return request

    def decode(self, reply: Mapping[str, Any], where: str) -> np.ndarray:
        """The (H, 7) chunk the reply's action keys form, gripper transformed.

        Each key must hold ([B,] H, 1) finite numbers (or ([B,] H,)), all with one H;
        anything else is an invalid action naming the key. The raw values are checked
        before any transform: a transform such as the gripper's sign would turn an
        infinity into an action the contract accepts.
        """
        columns = []
        horizon: int | None = None
        for key in self.actions:
            if key not in reply:
                raise InvalidAction(f"{where}: the reply has no {key!r} (keys: "
                                    f"{sorted(map(str, reply))[:20]}); the profile's [reply] "
                                    "actions name the keys it must hold")
            column = self._column(reply[key], key, where)
            if horizon is not None and column.shape[0] != horizon:
                raise InvalidAction(f"{where}: {key!r} has {column.shape[0]} steps, the "
                                    f"keys before it {horizon}")
            horizon = column.shape[0]
            columns.append(column)
        chunk = np.stack(columns, axis=1)
        chunk[:, -1] = GRIPPER_TRANSFORMS[self.gripper](chunk[:, -1])
        return chunk

    def _column(self, value: Any, key: str, where: str) -> np.ndarray:
        expected = ("(B=1, H, 1)" if self.batch else "(H, 1)")
        try:
            array = value if isinstance(value, np.ndarray) else np.asarray(value)
        except (ValueError, TypeError):  # a ragged list, say
            raise InvalidAction(f"{where}: {key!r} is not a rectangular array of numbers; "
                                f"expected {expected} floats") from None
        if isinstance(value, (list, tuple)):  # the array rule: no bool or int hides in it
            refuse_non_floats(value, array, f"{where}: {key!r}")
        shape = array.shape
        if self.batch:
            if array.ndim < 1 or shape[0] != 1:
                raise InvalidAction(f"{where}: {key!r} has shape {shape}; expected {expected}")
            array = array[0]
        if array.ndim == 2 and array.shape[1] == 1:
            array = array[:, 0]
        if array.ndim != 1 or array.shape[0] == 0:
            raise InvalidAction(f"{where}: {key!r} has shape {shape}; expected {expected}")
        if array.dtype.kind != "f":
            raise InvalidAction(f"{where}: {key!r} has dtype {array.dtype}; send floats")
        if not np.isfinite(array).all():
            bad = array[~np.isfinite(array)][0]
            raise InvalidAction(f"{where}: {key!r} holds {bad} (step "
                                f"{int(np.flatnonzero(~np.isfinite(array))[0])}); every "
                                "action value must be finite")
        return np.asarray(array, dtype=np.float64)

    def describe(self) -> dict[str, Any]:
        return {
            "images": dict(self.images),
            "language": self.language,
            "axes": [a for a, on in (("batch", self.batch), ("time", self.time)) if on],
            "state": {k: {"dtype": str(v.dtype), "values": v.tolist()}
                      for k, v in self.state.items()},
            "reply": {"actions": list(self.actions), "gripper": self.gripper},
        }
