"""GR00T's ZeroMQ server as a transport: its profile tables, preflight and ping.

Imports pyzmq (through ``gr00t.client``) only inside the methods that talk to a
server, so reading a gr00t profile never needs it (a policy server in a model's own
environment has no pyzmq).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from urllib.parse import urlsplit

import numpy as np

from pytest_libero.policy.contract import Policy
from pytest_libero.policy.errors import ServerError, TokenRefused
from pytest_libero.policy.gr00t.layout import GRIPPER_TRANSFORMS, Gr00tLayout
from pytest_libero.policy.gr00t.refusals import Refused, refused
from pytest_libero.policy.gr00t.wire import WIRE_SETTINGS
from pytest_libero.policy.limits import check_metadata
from pytest_libero.policy.transport import (
    OnWait,
    ServedProfile,
    TableReader,
    constant_array,
    read_constant,
)
from pytest_libero.protocol.errors import InvalidAction, SetupError
from pytest_libero.protocol.parameters import CAMERAS
from pytest_libero.protocol.text import clipped

_REQUEST_KEYS = {"agentview", "robot0_eye_in_hand", "language", "batch", "time", "state"}
_REPLY_KEYS = {"actions", "gripper"}


@dataclass(frozen=True)
class Gr00tSettings:
    """A gr00t profile's policy: the request and reply mapping, its state constants and
    the options that may replace them, the array form and where its API token is."""

    layout: Gr00tLayout
    state_options: Mapping[str, str] = field(default_factory=dict)
    """State key -> the policy option that may replace its constant."""
    api_token_env: str | None = None
    """The environment variable holding the server's api_token (never recorded)."""
    wire: str = "auto"
    """The array form: "auto" (told at preflight), "npy" or "msgpack-numpy"."""

    @property
    def api_token(self) -> str | None:
        return os.environ.get(self.api_token_env) if self.api_token_env else None


class Gr00tTransport:
    """GR00T's own server (docs/gr00t.md)."""

    name = "gr00t"
    served = True
    server_kind = "a GR00T"
    schemes = ("tcp://",)
    policy_keys = frozenset({"options", "api_token_env", "wire"})
    tables = frozenset({"request", "reply"})
    episode_start_calls = 2
    """get_modality_config and reset, after ping."""

    def read(self, reader: TableReader, raw: Mapping[str, Any]) -> Gr00tSettings:
        """[request] and [reply]; every key is required but the axes."""
        track = raw.get("track", "rgb")
        if track != "rgb":
            reader.fail("track", repr(track), "'rgb' with transport = 'gr00t' (GR00T's state "
                        "keys are declared constants under [request.state])")
        table = reader.table(raw, "request", required=False)
        reply = reader.table(raw, "reply")
        reader.keys(table, _REQUEST_KEYS, "request.")
        reader.keys(reply, _REPLY_KEYS, "reply.")
        state: dict[str, np.ndarray] = {}
        options: dict[str, str] = {}
        for key, spec in reader.table(table, "state", required=False).items():
            where = f"request.state.{key}"
            if not isinstance(spec, dict) or not {"dtype", "values"} <= set(spec) <= {
                    "dtype", "values", "option"}:
                reader.fail(where, repr(spec), "{ dtype = 'float32', values = [...], option = "
                            "'NAME' (optional: a policy option that replaces the values) }")
            state[key] = read_constant(reader, where, spec)
            if "option" in spec:
                options[key] = reader.string(spec, "option", f"{where}.")
        actions = reply.get("actions")
        if not isinstance(actions, list) or not all(isinstance(a, str) and a for a in actions):
            reader.fail("reply.actions", repr(actions), "a list of the 7 reply keys that form "
                        "the action columns in order (x y z roll pitch yaw gripper)")
        gripper = reader.choice(reply, "gripper", tuple(GRIPPER_TRANSFORMS), "reply.",
                                default="none")
        policy = raw["policy"]
        try:
            layout = Gr00tLayout(
                images={camera: reader.string(table, camera, "request.") for camera in CAMERAS},
                language=reader.string(table, "language", "request."),
                actions=tuple(actions),
                gripper=gripper,
                batch=reader.boolean(table, "batch", "request.", default=True),
                time=reader.boolean(table, "time", "request.", default=True),
                state=state,
            )
        except ValueError as exc:
            reader.fail("[request]/[reply]", str(exc), "one key per input, 7 action keys")
        return Gr00tSettings(
            layout=layout,
            state_options=options,
            api_token_env=(reader.string(policy, "api_token_env", "policy.")
                           if "api_token_env" in policy else None),
            wire=reader.choice(policy, "wire", WIRE_SETTINGS, "policy.", default="auto"),
        )

    def with_options(self, profile: ServedProfile, options: Mapping[str, Any]) -> Gr00tSettings:
        """The state constants with the operator's option values in place of the
        defaults; an option no state key names is refused (a typo must not pass as a 0)."""
        settings: Gr00tSettings = profile.settings
        unknown = sorted(set(options) - set(settings.state_options.values()))
        if unknown:
            allowed = ", ".join(sorted(settings.state_options.values())) or "none"
            raise SetupError(f"profile {profile.name!r} ({profile.source}): policy option "
                             f"{unknown[0]!r} names no state constant; allowed: {allowed}")
        state = dict(settings.layout.state)
        for key, option in settings.state_options.items():
            if option not in options:
                continue
            default = state[key]
            text = options[option]
            where = (f"--libero-policy-option {option}={text!r} (profile {profile.name!r}, "
                     f"state key {key!r})")
            try:
                values = [float(v) for v in str(text).split(",")]
            except ValueError:
                values = []
            if len(values) != default.size:
                raise SetupError(f"{where}: give {default.size} comma-separated number(s), e.g. "
                                 "the dataset mean from the checkpoint's statistics "
                                 "(docs/gr00t.md)")
            try:
                array = constant_array(values, str(default.dtype))
            except ValueError as exc:
                raise SetupError(f"{where}: {exc}") from None
            state[key] = array.reshape(default.shape)
        return _replace_state(settings, state)

    def endpoint_problem(self, endpoint: str) -> str | None:
        """tcp://HOST:PORT with a host and a port in 1-65535 (ZeroMQ would wait out the
        whole wait on an address it can never reach)."""
        if not endpoint.startswith(self.schemes):
            return f"{endpoint!r} is not a ZeroMQ address"
        parts = urlsplit(endpoint)
        try:
            port = parts.port
        except ValueError:  # not a number, or out of range
            port = None
        if not parts.hostname or port is None or port == 0 or parts.path not in ("", "/"):
            return f"{endpoint!r} has no valid host and port"
        return None

    def feeds_constants(self, settings: Any) -> bool:
        return bool(settings.layout.state)

    def build(self, profile: ServedProfile) -> Policy:
        from pytest_libero.policy.gr00t.client import Gr00tPolicy  # pyzmq only where it is needed

        if not profile.endpoint:
            raise SetupError(f"profile {profile.name!r} ({profile.source}): no policy.endpoint; "
                             "set it in the profile or pass --libero-endpoint=tcp://HOST:PORT")
        settings: Gr00tSettings = profile.settings
        return Gr00tPolicy(profile.endpoint, layout=settings.layout,
                           connect_timeout=profile.connect_timeout,
                           call_timeout=profile.call_timeout, wait_s=profile.wait_s,
                           api_token=settings.api_token, wire=settings.wire)

    def preflight(self, profile: ServedProfile, on_wait: OnWait | None) -> dict[str, Any]:
        """``client.preflight_facts``, its refusals explained as usage errors."""
        from pytest_libero.policy.gr00t.client import Gr00tPolicy, WireUnknown, preflight_facts

        where = (f"the GR00T server at {profile.endpoint} (profile {profile.name!r}, "
                 f"{profile.source})")
        policy = self.build(profile)
        assert isinstance(policy, Gr00tPolicy)
        try:
            facts = preflight_facts(policy, on_wait)
            check_metadata(policy.metadata, f"the GR00T server at {profile.endpoint}")
            return facts
        except TokenRefused:
            raise SetupError(f"{where} refused the API token ({_token_refusal(profile.settings)})"
                             "; no case was run") from None
        except WireUnknown as exc:
            raise SetupError(f"{_first_line(exc)}; no case was run") from None
        except ServerError as exc:
            raise SetupError(_server_refusal(where, exc)) from None
        except InvalidAction as exc:
            raise SetupError(f"{where} answered a probe get_action with actions the profile's "
                             f"[reply] cannot map; no case was run: {_first_line(exc)}") from None
        finally:
            policy.close()

    def answering(self, profile: ServedProfile) -> None:
        """GR00T's ``ping``, within wait_s."""
        from pytest_libero.policy.gr00t.client import Gr00tClient

        settings: Gr00tSettings = profile.settings
        with Gr00tClient(profile.endpoint or "", connect_timeout=profile.connect_timeout,
                         call_timeout=profile.connect_timeout,
                         api_token=settings.api_token) as client:
            client.wait_ready(profile.wait_s)

    def describe(self, settings: Any) -> dict[str, Any]:
        return {"wire": settings.wire, "request_layout": settings.layout.describe()}


def _replace_state(settings: Gr00tSettings, state: dict[str, np.ndarray]) -> Gr00tSettings:
    return replace(settings, layout=replace(settings.layout, state=state))


def _token_refusal(settings: Gr00tSettings) -> str:
    """What was sent as the API token and what to do, in words, never the token itself."""
    env = settings.api_token_env
    if env is None:
        return ("no token was sent: the profile sets no policy.api_token_env. Use a profile of "
                "your own that names the variable holding the token (policy.api_token_env = "
                "\"GR00T_API_TOKEN\", docs/gr00t.md) and export that variable")
    if settings.api_token is None:
        return (f"no token was sent: policy.api_token_env names {env}, which is not set here. "
                f"Export {env} with the token the server was given (PolicyServer's api_token)")
    return (f"the token in ${env} was sent and the server refused it: it is not the token the "
            f"server was given (PolicyServer's api_token). Export the server's token as {env}")


def _server_refusal(where: str, exc: ServerError) -> str:
    """Preflight's probe answered with an error: say what the server's words say was
    refused (the request, its model's reply, or a server without the sim-policy wrapper)."""
    words = clipped(exc.traceback.strip().splitlines()[0] if exc.traceback.strip() else "")
    kind = refused(exc.traceback)
    if kind is Refused.REPLY:
        return (f"{where} answered the probe get_action with an error from its own output "
                f"check: the reply its model produced failed it, not our request (\"{words}\"). "
                "The checkpoint answers actions its modality config does not describe (a "
                "horizon or key the config does not name); check the checkpoint and the "
                "server's --embodiment-tag. No case was run")
    if kind is Refused.UNWRAPPED:
        return (f"{where} refused the probe get_action with \"{words}\": it was started "
                "without the sim-policy wrapper, so it wants nested observations, not the flat "
                "video.*/state.* keys GR00T's LIBERO loop and this profile send. Restart it "
                "with --use-sim-policy-wrapper; no case was run")
    return (f"{where} answered ping but refused a preflight request (its probe get_action is "
            "the request every case sends: black images, the profile's keys and state "
            f"constants); no case was run: {_first_line(exc)}")


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


GR00T = Gr00tTransport()
