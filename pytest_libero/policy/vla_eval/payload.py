"""An observation as vla-eval's LIBERO benchmark sends it, and its action as it executes it.

vla-eval's ``benchmarks/libero`` sends ``images.agentview`` (256x256x3 uint8, flipped on
both axes: the protocol's delivered image exactly) and ``task_description``; the wrist
image (``images.wrist``) and the state only when the server's hello asks for them
(``observation_params``: ``send_wrist_image``, ``send_state``). Its state is an end-effector
pose (``states``: position, axis-angle, gripper joints; ``controller_states`` the same
read from the controller), which the protocol never sends (P5): a server that asks for it
gets the profile's declared constants, labelled in the profile's identity, or is refused
before any case. It executes one 7-vector a reply, its gripper made -1 (open) below zero
and +1 (close) otherwise; a chunk is the server's business (``chunk_size``).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from pytest_libero.policy.contract import RAW_REPLY, Observation, float_array
from pytest_libero.protocol.errors import InvalidAction
from pytest_libero.protocol.parameters import ACTION_DIM

__all__ = ["STATE_DTYPES", "STATE_KEYS", "ServerWants", "VlaEvalLayout", "executed_action"]

STATE_DTYPES: Final = {"states": "float64", "controller_states": "float32"}
"""The state inputs vla-eval's LIBERO sends when asked, in its dtypes; only constants may
fill them here."""
STATE_KEYS: Final = tuple(STATE_DTYPES)
HONOURED_PARAMS: Final = frozenset({"send_wrist_image", "send_state"})
REFUSED_PARAMS: Final = {"absolute_action": "absolute (world-frame) actions"}
"""observation_params the protocol cannot honour, and what each would change."""


@dataclass(frozen=True)
class ServerWants:
    """What a server's hello asked the benchmark to send (its ``observation_params``)."""

    wrist: bool = False
    state: bool = False
    ignored: Mapping[str, Any] = field(default_factory=dict)
    """Parameters that change nothing sent (a seed, say): recorded, not applied."""

    @classmethod
    def from_hello(cls, hello: Mapping[str, Any], where: str) -> ServerWants:
        """Read ``observation_params``; ValueError naming a parameter the protocol cannot
        honour (absolute actions) or one that is not a map."""
        params = hello.get("observation_params") or {}
        if not isinstance(params, Mapping):
            raise ValueError(f"{where} sent observation_params {params!r}, not a map")
        for key, what in REFUSED_PARAMS.items():
            if params.get(key):
                raise ValueError(f"{where} asks for {key}={params[key]!r} ({what}); the "
                                 "protocol executes delta actions only (P6), so its model "
                                 "cannot be evaluated here")
        return cls(wrist=bool(params.get("send_wrist_image", False)),
                   state=bool(params.get("send_state", False)),
                   ignored={str(k): v for k, v in params.items() if k not in HONOURED_PARAMS})

    def describe(self) -> dict[str, Any]:
        return {"send_wrist_image": self.wrist, "send_state": self.state,
                "ignored": dict(self.ignored)}


@dataclass(frozen=True)
class VlaEvalLayout:
    """A vla-eval profile's request: the image form, the benchmark named in the hello,
    and the constants that stand in for the state a server may ask for."""

    image_format: str = "png"
    benchmark: str = "libero"
    constants: Mapping[str, np.ndarray] = field(default_factory=dict)

    def payload(self, observation: Observation, wants: ServerWants) -> dict[str, Any]:
        """The observation message's payload for a server that wants ``wants``."""
        images = {"agentview": observation.images["agentview"]}
        if wants.wrist:
            images["wrist"] = observation.images["robot0_eye_in_hand"]
        payload: dict[str, Any] = {"images": images, "task_description": observation.language}
        if wants.state:
            payload.update(self.constants)
        return payload

    def describe(self) -> dict[str, Any]:
        return {
            "image_format": self.image_format,
            "benchmark": self.benchmark,
            "constants": {k: {"dtype": str(v.dtype), "shape": list(v.shape), "values": v.tolist()}
                          for k, v in self.constants.items()},
        }


def executed_action(reply: Mapping[str, Any]) -> dict[str, Any]:
    """The reply as the contract reads it: the one 7-vector with vla-eval's gripper rule
    applied, and the server's own vector kept as the raw reply. Non-finite values stay as
    they are, for the contract to refuse (the gripper rule would hide a NaN)."""
    actions = reply.get("actions", reply.get("action"))
    if actions is None:
        raise InvalidAction(f"the action message has no 'actions' (keys: {sorted(reply)}); a "
                            "vla-eval server answers {'actions': 7 floats}")
    vector = float_array(actions, "'actions'")
    if vector.ndim != 1 or vector.shape[0] != ACTION_DIM:
        raise InvalidAction(
            f"'actions' has shape {tuple(vector.shape)}; vla-eval's LIBERO benchmark executes "
            f"one ({ACTION_DIM},) action a reply, so a server sends a chunk one action at a "
            "time (PredictModelServer's chunk_size)")
    if vector.dtype.kind != "f":
        return {"actions": vector}  # the contract names the dtype
    executed = vector.astype(np.float64)
    gripper = executed[-1]
    if np.isfinite(gripper):
        executed[-1] = -1.0 if gripper < 0 else 1.0
    return {"actions": executed, RAW_REPLY: {"actions": vector}}
