"""A policy behind an openpi-compatible websocket server, seen through the contract.

The connection is opened at the start of each episode (the first one after GET
/healthz), so a server the plugin launches has time to come up. A call that fails
closes the socket (the client never reuses it) and errors its case; the next episode
connects afresh, so one bad call costs one case, never the run. ``WEBSOCKET`` is the
transport a ``transport = "websocket"`` profile names: it reads the profile's
``[request]`` table into a :class:`RequestLayout` and builds the policy.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from pytest_libero.policy.contract import Observation, Policy
from pytest_libero.policy.limits import check_metadata
from pytest_libero.policy.openpi.client import WebsocketPolicyClient, address_problem
from pytest_libero.policy.openpi.layout import RequestLayout
from pytest_libero.policy.openpi.probe import connect_within, probe_server
from pytest_libero.policy.transport import OnWait, ServedProfile, TableReader, read_constant
from pytest_libero.protocol.errors import SetupError


class WebsocketPolicy:
    """Implements the Policy protocol over :class:`WebsocketPolicyClient`.

    Each episode gets its own connection: pytest-libero's server resets its policy
    before a connection's first request, so a connection is the episode boundary
    whatever the request layout sends (see openpi/server.py).
    """

    def __init__(
        self,
        endpoint: str,
        *,
        layout: RequestLayout,
        connect_timeout: float,
        call_timeout: float,
        wait_s: float,
    ) -> None:
        self.endpoint = endpoint
        self.layout = layout
        self.wait_s = wait_s
        self.client = WebsocketPolicyClient(
            endpoint, connect_timeout=connect_timeout, call_timeout=call_timeout
        )
        self.metadata: Mapping[str, Any] = {}
        self.connections = 0

    def reset(self) -> None:
        """Start an episode on a new connection, waiting up to ``wait_s`` for the server."""
        self.client.close()
        metadata = connect_within(self.client, self.wait_s, health=self.connections == 0)
        self.metadata = {str(k): v for k, v in metadata.items()}
        self.connections += 1

    def infer(self, observation: Observation) -> Mapping[str, Any]:
        return self.client.infer(self.layout.encode(observation))

    def close(self) -> None:
        self.client.close()


_REQUEST_KEYS = {"agentview", "robot0_eye_in_hand", "language", "proprio", "counters", "constants"}


class WebsocketTransport:
    """openpi's websocket protocol: a ``[request]`` table of key names and constants."""

    name = "websocket"
    served = True
    server_kind = "an openpi"
    schemes = ("ws://", "wss://")
    policy_keys: frozenset[str] = frozenset()
    tables = frozenset({"request", "launch"})
    episode_start_calls = 0
    policy_class: Callable[..., Policy] = WebsocketPolicy
    """What ``build`` makes: a websocket wire's policy over its own client."""

    def read(self, reader: TableReader, raw: Mapping[str, Any]) -> RequestLayout:
        table = reader.table(raw, "request", required=False)
        reader.keys(table, _REQUEST_KEYS, "request.")
        default = RequestLayout()
        images = {
            camera: reader.string(table, camera, "request.") if camera in table else key
            for camera, key in default.images.items()
        }
        constants: dict[str, np.ndarray] = {}
        for key, spec in reader.table(table, "constants", required=False).items():
            where = f"request.constants.{key}"
            if not isinstance(spec, dict) or set(spec) != {"dtype", "values"}:
                reader.fail(where, repr(spec), "{ dtype = 'float32', values = [...] }")
            constants[key] = read_constant(reader, where, spec)
        try:
            return RequestLayout(
                images=images,
                language=(reader.string(table, "language", "request.") if "language" in table
                          else default.language),
                proprio=(reader.string(table, "proprio", "request.") if "proprio" in table
                         else default.proprio),
                counters=reader.boolean(table, "counters", "request.", default=False),
                constants=constants,
            )
        except ValueError as exc:
            reader.fail("[request]", str(exc), "one key per input")

    def with_options(self, profile: ServedProfile, options: Mapping[str, Any]) -> Any:
        raise SetupError(f"--libero-policy-option: profile {profile.name!r} is served "
                         f"(transport {self.name}); its options belong to the server")

    def endpoint_problem(self, endpoint: str) -> str | None:
        return address_problem(endpoint)

    def feeds_constants(self, settings: Any) -> bool:
        return bool(settings.constants)

    def build(self, profile: ServedProfile) -> Policy:
        if not profile.endpoint:
            raise SetupError(f"profile {profile.name!r} ({profile.source}): no policy.endpoint; "
                             "set it in the profile or pass --libero-endpoint=ws://HOST:PORT")
        return self.policy_class(
            profile.endpoint, layout=profile.settings, connect_timeout=profile.connect_timeout,
            call_timeout=profile.call_timeout, wait_s=profile.wait_s)

    def preflight(self, profile: ServedProfile, on_wait: OnWait | None) -> dict[str, Any]:
        self._probe(profile, on_wait)
        return {"transport": self.name, "endpoint": profile.endpoint}

    def answering(self, profile: ServedProfile) -> None:
        self._probe(profile, None)

    def _probe(self, profile: ServedProfile, on_wait: OnWait | None) -> None:
        """GET /healthz, then a connection that reads the metadata frame, within wait_s;
        metadata past its bound is refused (``policy.limits``)."""
        metadata = probe_server(profile.endpoint or "", wait_s=profile.wait_s,
                                connect_timeout=profile.connect_timeout, on_wait=on_wait)
        check_metadata({str(k): v for k, v in metadata.items()},
                       f"the policy server at {profile.endpoint}")

    def describe(self, settings: Any) -> dict[str, Any]:
        return {"request_layout": settings.describe()}


WEBSOCKET = WebsocketTransport()
