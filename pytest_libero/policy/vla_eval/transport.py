"""vla-eval's model servers as a transport: the profile's ``[request]`` and the preflight.

Preflight reads the server's hello (GET /health first) and holds its ``observation_params``
against the profile before any case: a server that asks for the state gets the
profile's declared constants (``[request.constants]`` ``states`` and
``controller_states``, labelled in the identity), or the run is refused with the fix; a
server that asks for absolute actions is refused.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from pytest_libero.policy.errors import ProtocolViolation
from pytest_libero.policy.limits import check_metadata
from pytest_libero.policy.openpi.probe import connect_within
from pytest_libero.policy.openpi.transport import WebsocketTransport
from pytest_libero.policy.transport import OnWait, ServedProfile, TableReader, read_constant
from pytest_libero.policy.vla_eval.client import VlaEvalClient, VlaEvalPolicy
from pytest_libero.policy.vla_eval.payload import STATE_DTYPES, STATE_KEYS, ServerWants, VlaEvalLayout
from pytest_libero.policy.vla_eval.wire import IMAGE_FORMATS
from pytest_libero.protocol.errors import SetupError

_REQUEST_KEYS = {"image_format", "benchmark", "constants"}


class VlaEvalTransport(WebsocketTransport):
    """vla-eval's websocket protocol (docs/models.md): openpi's transport in everything but
    its table, its policy, its preflight and what it records."""

    name = "vla-eval"
    server_kind = "a vla-eval"
    tables = frozenset({"request"})
    policy_class = VlaEvalPolicy

    def read(self, reader: TableReader, raw: Mapping[str, Any]) -> Any:
        """The profile's [request] as a :class:`VlaEvalLayout`."""
        track = raw.get("track", "rgb")
        if track != "rgb":
            reader.fail("track", repr(track), "'rgb' with transport = 'vla-eval' (its state is an "
                        "end-effector pose, which the protocol never sends: declare constants "
                        "under [request.constants] instead)")
        table = reader.table(raw, "request", required=False)
        reader.keys(table, _REQUEST_KEYS, "request.")
        constants: dict[str, np.ndarray] = {}
        spec_table = reader.table(table, "constants", required=False)
        reader.keys(spec_table, set(STATE_KEYS), "request.constants.")
        for key, spec in spec_table.items():
            where = f"request.constants.{key}"
            if not isinstance(spec, dict) or set(spec) != {"dtype", "values"}:
                reader.fail(where, repr(spec), "{ dtype = 'float64', values = [8 numbers] }")
            constants[key] = read_constant(reader, where, spec)
        return VlaEvalLayout(
            image_format=reader.choice(table, "image_format", IMAGE_FORMATS, "request.",
                                       default="png"),
            benchmark=(reader.string(table, "benchmark", "request.") if "benchmark" in table
                       else "libero"),
            constants=constants,
        )

    def preflight(self, profile: ServedProfile, on_wait: OnWait | None) -> dict[str, Any]:
        """The server's hello, held against the profile; run.json keeps what it asked."""
        hello = self._hello(profile, on_wait)
        where = f"the vla-eval server at {profile.endpoint} (profile {profile.name!r}, {profile.source})"
        try:
            wants = ServerWants.from_hello(hello, where)
        except ValueError as exc:
            raise SetupError(f"{exc}; no case was run") from None
        layout: VlaEvalLayout = profile.settings
        missing = [key for key in STATE_KEYS if key not in layout.constants]
        if wants.state and missing:
            raise SetupError(
                f"{where} asks for the state (observation_params send_state), an end-effector "
                "pose the protocol never sends (P5). Declare what to send instead in a profile "
                "of your own, labelled in every record: [request.constants] " + ", ".join(
                    f'{key} = {{ dtype = "{STATE_DTYPES[key]}", values = [0, 0, 0, 0, 0, 0, 0, 0] }}'
                    for key in missing) + " (docs/models.md); no case was run")
        return {"transport": self.name, "endpoint": profile.endpoint,
                "model_server": hello.get("model_server"),
                "harness_version": hello.get("harness_version"),
                "protocol_version": hello.get("protocol_version"),
                "observation_params": wants.describe()}

    def answering(self, profile: ServedProfile) -> None:
        self._hello(profile, None)

    def _hello(self, profile: ServedProfile, on_wait: OnWait | None) -> dict[str, Any]:
        """GET /health, then a connection that says hello and reads the server's, within
        wait_s; a hello past the metadata bound is refused (``policy.limits``)."""
        with VlaEvalClient(profile.endpoint or "", connect_timeout=profile.connect_timeout,
                           call_timeout=profile.connect_timeout,
                           layout=profile.settings) as client:
            hello = {str(k): v for k, v in connect_within(client, profile.wait_s,
                                                          on_wait=on_wait).items()}
        version = hello.get("protocol_version")
        if version is not None and version != 1:
            raise ProtocolViolation(f"the vla-eval server at {profile.endpoint} speaks protocol "
                                    f"version {version!r}; this client speaks version 1")
        check_metadata(hello, f"the vla-eval server at {profile.endpoint}")
        return hello

    def describe(self, settings: Any) -> dict[str, Any]:
        return {"request_layout": settings.describe()}


VLA_EVAL = VlaEvalTransport()
