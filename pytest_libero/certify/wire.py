"""A profile's server reached as check-server needs it: fresh policies (each its own
connection), malformed observations and calls abandoned mid-way, on the profile's own wire.

Every wire pytest-libero speaks is reached: openpi's and vla-eval's websockets, and GR00T's
ZeroMQ server in either array generation.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

import numpy as np

from pytest_libero.config.profiles import Profile
from pytest_libero.policy.contract import Observation, Policy
from pytest_libero.policy.errors import CodecError, ConnectionLost, ProtocolViolation, ServerError
from pytest_libero.policy.gr00t.client import Gr00tPolicy
from pytest_libero.policy.openpi.codec import pack
from pytest_libero.policy.openpi.transport import WebsocketPolicy
from pytest_libero.policy.vla_eval.client import VlaEvalPolicy
from pytest_libero.policy.vla_eval.wire import pack_message, unpack_message
from pytest_libero.protocol.errors import SetupError

__all__ = ["CHECKED_WIRES", "MALFORMED", "ServerLine"]

CHECKED_WIRES: Final = ("websocket", "vla-eval", "gr00t")
OVERSIZED_SIDE: Final = 2048
"""An oversized image's side: 2048x2048x3, 12 MiB where 256x256 is due."""


def _missing(images: dict[str, Any]) -> None:
    images.pop(next(iter(images)))


def _wrong_dtype(images: dict[str, Any]) -> None:
    key = next(iter(images))
    images[key] = np.asarray(images[key], dtype=np.float64)


def _oversized(images: dict[str, Any]) -> None:
    images[next(iter(images))] = np.zeros((OVERSIZED_SIDE, OVERSIZED_SIDE, 3), dtype=np.uint8)


MALFORMED: Final[dict[str, Callable[[dict[str, Any]], None]]] = {
    "missing image": _missing,
    "float image": _wrong_dtype,
    "oversized image": _oversized,
}
"""How an observation's first image is spoilt, by name."""


class ServerLine:
    """The server behind ``profile``, for the checks."""

    def __init__(self, profile: Profile) -> None:
        if profile.transport not in CHECKED_WIRES:
            raise SetupError(f"check-server reaches servers over {', '.join(CHECKED_WIRES)}; "
                             f"profile {profile.name!r} uses transport {profile.transport!r}, "
                             "which it does not check yet")
        self.profile = profile

    def policy(self) -> Policy:
        """A policy object of its own: its own connection, opened by ``reset``."""
        policy: Policy = self.profile.build_policy()
        return policy

    def _gr00t_request(self, policy: Gr00tPolicy, observation: Observation,
                       spoil: Callable[[dict[str, Any]], None] | None) -> dict[str, Any]:
        """A get_action request's data for ``observation``, its images spoilt."""
        request = policy.layout.encode(observation)
        images = {key: request.pop(key) for key in policy.layout.images.values()}
        if spoil is not None:
            spoil(images)
        return {"observation": {**request, **images}, "options": None}

    def _frame(self, policy: Policy, observation: Observation,
               spoil: Callable[[dict[str, Any]], None] | None) -> bytes:
        """The request ``policy`` would send for ``observation``, its images spoilt."""
        if isinstance(policy, VlaEvalPolicy):
            payload = policy.layout.payload(observation, policy.wants)
            if spoil is not None:
                spoil(payload["images"])
            return pack_message("observation", payload, policy.client.seq + 1,
                                image_format="raw")
        assert isinstance(policy, WebsocketPolicy)
        request = policy.layout.encode(observation)
        images = {key: request.pop(key) for key in policy.layout.images.values()}
        if spoil is not None:
            spoil(images)
        return pack({**request, **images})

    def send_malformed(self, policy: Policy, observation: Observation, kind: str) -> str:
        """Send ``observation`` spoilt as ``kind`` says; how the server took it: "error"
        (an error reply), "closed" (it dropped the connection), "answered" (an action, as if
        nothing were wrong). A timeout or anything else the client meets is raised."""
        try:
            if isinstance(policy, Gr00tPolicy):
                policy.client.exchange("get_action", self._gr00t_request(
                    policy, observation, MALFORMED[kind]))
                return "answered"
            frame = self._frame(policy, observation, MALFORMED[kind])
            received, _ = policy.client.exchange(frame)  # type: ignore[attr-defined]
        except ServerError:
            return "error"
        except ConnectionLost:
            return "closed"
        if isinstance(policy, VlaEvalPolicy):
            policy.client.close()
            try:
                message = unpack_message(received, "the server")
            except (CodecError, ProtocolViolation):
                return "answered"
            return "error" if message.type == "error" else "answered"
        return "answered"

    def abandon(self, policy: Policy, observation: Observation) -> None:
        """Send ``observation`` and drop the connection before its reply."""
        if isinstance(policy, Gr00tPolicy):
            policy.client.abandon("get_action", self._gr00t_request(policy, observation, None))
            return
        policy.client.abandon(self._frame(policy, observation, None))  # type: ignore[attr-defined]
