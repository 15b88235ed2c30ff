"""Model profiles: what a model needs (transport, request keys, track, budgets, stop rule).

A profile describes the model, not the operator. It is a TOML file, shipped ones in
``pytest_libero/data/profiles`` or any path; every key is validated on load and an
error names the file, the key and what is allowed. The profile's bytes are hashed
into the run's identity.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from pytest_libero.data import data_path
from pytest_libero.policy.contract import OUT_OF_BOUNDS_MODES
from pytest_libero.policy.factory import build_inprocess
from pytest_libero.policy.gr00t_layout import GRIPPER_TRANSFORMS, Gr00tLayout
from pytest_libero.policy.gr00t_wire import WIRE_SETTINGS
from pytest_libero.policy.launcher import Launch
from pytest_libero.policy.layout import RequestLayout
from pytest_libero.policy.remote import WebsocketPolicy
from pytest_libero.policy.websocket import address_problem
from pytest_libero.protocol.budgets import StopRule
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.hashing import sha256_bytes
from pytest_libero.protocol.parameters import (
    BUDGET_MODES,
    DEFAULT_MAX_POLICY_CALLS,
    DEFAULT_REPLAN_INTERVAL,
    TRACKS,
)

TRANSPORTS = ("inprocess", "websocket", "gr00t")
SERVED = ("websocket", "gr00t")
"""Transports whose policy sits behind a server the plugin must find (probe.py)."""
_ENDPOINT_SCHEMES = {"websocket": ("ws://", "wss://"), "gr00t": ("tcp://",)}
_TOP_KEYS = {"name", "description", "infrastructure", "track", "policy", "request", "launch",
             "budget", "stop", "action", "reply"}
_POLICY_KEYS = {"transport", "factory", "options", "endpoint", "connect_timeout", "call_timeout",
                "wait_s", "server_hint", "api_token_env", "wire"}
_ACTION_KEYS = {"out_of_bounds"}
_REQUEST_KEYS = {"agentview", "robot0_eye_in_hand", "language", "proprio", "counters", "constants"}
_GR00T_REQUEST_KEYS = {"agentview", "robot0_eye_in_hand", "language", "batch", "time", "state"}
_REPLY_KEYS = {"actions", "gripper"}
STATE_FED = ("proprio", "constant", "none")
"""What a run's profile fed a model as its state: the simulator's proprio vector (the
rgb+proprio track), declared constants, or nothing."""

_LAUNCH_KEYS = {"command", "cwd", "env", "startup_timeout"}
_BUDGET_KEYS = {"mode", "replan_interval", "max_policy_calls"}
_STOP_KEYS = {"consecutive"}
_CONSTANT_DTYPES = ("float32", "float64", "int32", "int64", "uint8")


@dataclass(frozen=True)
class Profile:
    """A validated model profile."""

    name: str
    source: str
    sha256: str
    description: str
    infrastructure: bool
    track: str
    transport: str
    factory: str
    options: Mapping[str, Any]
    budget_mode: str
    replan_interval: int
    max_policy_calls: int
    stop_rule: StopRule
    endpoint: str | None = None
    connect_timeout: float = 10.0
    call_timeout: float = 60.0
    wait_s: float = 30.0
    server_hint: str = ""
    """How to start the server this profile expects; shown when none answers."""
    out_of_bounds: str = "error"
    """What an action outside [-1, 1] does: "error" (strict) or "clip" (recorded)."""
    layout: RequestLayout = field(default_factory=RequestLayout)
    launch: Launch | None = None
    gr00t: Gr00tLayout | None = None
    """transport = "gr00t": request keys and axes, state constants, reply mapping."""
    state_options: Mapping[str, str] = field(default_factory=dict)
    """State key -> the policy option that may replace its constant (gr00t)."""
    api_token_env: str | None = None
    """The environment variable holding a GR00T server's api_token (never recorded)."""
    wire: str = "auto"
    """A GR00T server's array form: "auto" (told at preflight), "npy" or "msgpack-numpy"."""

    @property
    def state_fed(self) -> str:
        """What this profile feeds as state: ``proprio``, ``constant`` or ``none``."""
        if self.track == "rgb+proprio":
            return "proprio"
        if (self.gr00t is not None and self.gr00t.state) or self.layout.constants:
            return "constant"
        return "none"

    @property
    def api_token(self) -> str | None:
        return os.environ.get(self.api_token_env) if self.api_token_env else None

    def with_overrides(
        self,
        options: Mapping[str, Any] | None = None,
        endpoint: str | None = None,
        call_timeout: float | None = None,
        wait_s: float | None = None,
        out_of_bounds: str | None = None,
    ) -> Profile:
        """The same profile with the operator's settings layered on top."""
        changes: dict[str, Any] = {}
        if options:
            if self.transport == "websocket":
                raise SetupError(f"--libero-policy-option: profile {self.name!r} is served "
                                 "(transport websocket); its options belong to the server")
            changes["options"] = {**self.options, **options}
            if self.gr00t is not None:
                changes["gr00t"] = replace(self.gr00t, state=_state_from_options(
                    self, self.gr00t.state, changes["options"]))
        if endpoint is not None:
            if self.transport not in SERVED:
                raise SetupError(f"--libero-endpoint: profile {self.name!r} runs its policy "
                                 "in-process; an endpoint needs a websocket profile (or a gr00t "
                                 "one)")
            scheme = _ENDPOINT_SCHEMES[self.transport][0]
            problem = (address_problem(endpoint) if self.transport == "websocket"
                       else None if endpoint.startswith(scheme)
                       else f"{endpoint!r} is not a ZeroMQ address")
            if problem is not None:
                raise SetupError(f"--libero-endpoint: {problem}; give {scheme}HOST:PORT")
            changes["endpoint"] = endpoint
        if call_timeout is not None:
            changes["call_timeout"] = call_timeout
        if wait_s is not None:
            changes["wait_s"] = wait_s
        if out_of_bounds is not None:
            if out_of_bounds not in OUT_OF_BOUNDS_MODES:
                raise SetupError(f"--libero-out-of-bounds={out_of_bounds!r}; allowed: "
                                 f"{', '.join(OUT_OF_BOUNDS_MODES)}")
            changes["out_of_bounds"] = out_of_bounds
        return replace(self, **changes) if changes else self

    @property
    def start_hint(self) -> str:
        """How to start the server, in the profile's words or generic ones."""
        return self.server_hint or (
            "python -m pytest_libero.serve --policy MODULE:FACTORY --port PORT "
            "(in the model's own environment)"
        )

    def build_policy(self) -> Any:
        """Build the profile's policy; a remote one connects at its first episode."""
        if self.transport == "websocket":
            if not self.endpoint:
                raise SetupError(
                    f"profile {self.name!r} ({self.source}): no policy.endpoint; set it in "
                    "the profile or pass --libero-endpoint=ws://HOST:PORT"
                )
            return WebsocketPolicy(
                self.endpoint,
                layout=self.layout,
                connect_timeout=self.connect_timeout,
                call_timeout=self.call_timeout,
                wait_s=self.wait_s,
            )
        if self.transport == "gr00t":
            # Imported here: pyzmq is needed only where a gr00t profile runs, never by a
            # policy server in the model's own environment (python -m pytest_libero.serve).
            from pytest_libero.policy.gr00t import Gr00tPolicy

            assert self.gr00t is not None
            if not self.endpoint:
                raise SetupError(
                    f"profile {self.name!r} ({self.source}): no policy.endpoint; set it in "
                    "the profile or pass --libero-endpoint=tcp://HOST:PORT"
                )
            return Gr00tPolicy(self.endpoint, layout=self.gr00t,
                               connect_timeout=self.connect_timeout,
                               call_timeout=self.call_timeout, wait_s=self.wait_s,
                               api_token=self.api_token, wire=self.wire)
        return build_inprocess(self.factory, self.options, f"profile {self.name!r} ({self.source})",
                               out_of_bounds=self.out_of_bounds)

    def identity(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "sha256": self.sha256,
            "infrastructure": self.infrastructure,
            "track": self.track,
            "transport": self.transport,
            **({"wire": self.wire} if self.transport == "gr00t" else {}),
            "factory": self.factory or None,
            "options": {k: str(v) for k, v in self.options.items()},
            "endpoint": self.endpoint,
            "request_layout": (self.layout.describe() if self.transport == "websocket"
                               else self.gr00t.describe() if self.gr00t is not None else None),
            "state_fed": self.state_fed,
            "call_timeout": self.call_timeout,
            "out_of_bounds": self.out_of_bounds,
        }


def builtin_names() -> list[str]:
    folder = data_path("profiles")
    return sorted(p.name[:-5] for p in folder.iterdir() if p.name.endswith(".toml"))


def load_profile(name_or_path: str) -> Profile:
    """Load a shipped profile by name, or any TOML file by path."""
    if name_or_path.endswith(".toml") or "/" in name_or_path:
        path = Path(name_or_path).expanduser()
        if not path.is_file():
            raise SetupError(f"--libero-profile: no profile file at {path}")
        return parse_profile(path.read_bytes(), str(path.resolve()))
    resource = data_path("profiles").joinpath(f"{name_or_path}.toml")
    if not resource.is_file():
        raise SetupError(
            f"--libero-profile={name_or_path!r} is not a shipped profile; "
            f"shipped: {', '.join(builtin_names())}, or give a path to a .toml file"
        )
    return parse_profile(resource.read_bytes(), f"builtin:{name_or_path}")


def parse_profile(data: bytes, source: str) -> Profile:
    try:
        raw = tomllib.loads(data.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SetupError(f"profile {source}: not valid TOML: {exc}") from exc
    check = _Checker(source)
    check.keys(raw, _TOP_KEYS, "")
    name = check.string(raw, "name", "")
    policy = check.table(raw, "policy")
    check.keys(policy, _POLICY_KEYS, "policy.")
    transport = check.choice(policy, "transport", TRANSPORTS, "policy.", default="inprocess")
    if transport == "inprocess":
        factory = check.string(policy, "factory", "policy.")
        if ":" not in factory:
            check.fail("policy.factory", f"{factory!r}", "'module:callable'")
        for key in ("endpoint", "connect_timeout", "call_timeout", "wait_s", "server_hint",
                    "api_token_env", "wire"):
            if key in policy:
                check.fail(f"policy.{key}", "set", "only with a served transport "
                           "(websocket, gr00t)")
    else:
        factory = ""
        if "factory" in policy:
            check.fail("policy.factory", "set", "only with transport = 'inprocess'")
        if "options" in policy and transport != "gr00t":
            check.fail("policy.options", "set", "only with transport = 'inprocess' or 'gr00t'")
        for key in ("api_token_env", "wire"):
            if key in policy and transport != "gr00t":
                check.fail(f"policy.{key}", "set", "only with transport = 'gr00t'")
    endpoint = policy.get("endpoint")
    schemes = _ENDPOINT_SCHEMES.get(transport, _ENDPOINT_SCHEMES["websocket"])
    if endpoint is not None:
        wrong = not (isinstance(endpoint, str) and endpoint.startswith(schemes))
        if wrong or (schemes == _ENDPOINT_SCHEMES["websocket"] and address_problem(endpoint)):
            check.fail("policy.endpoint", repr(endpoint), f"a {schemes[0]}HOST:PORT address")
    options = check.table(policy, "options", required=False)
    budget = check.table(raw, "budget", required=False)
    check.keys(budget, _BUDGET_KEYS, "budget.")
    stop = check.table(raw, "stop", required=False)
    check.keys(stop, _STOP_KEYS, "stop.")
    consecutive = check.integer(stop, "consecutive", "stop.", default=0, minimum=0)
    action = check.table(raw, "action", required=False)
    check.keys(action, _ACTION_KEYS, "action.")
    if transport == "inprocess" and ("request" in raw or "launch" in raw):
        check.fail("request/launch", "set", "only with a served transport (websocket, gr00t)")
    if transport == "gr00t" and "launch" in raw:
        check.fail("launch", "set", "only with transport = 'websocket' (start GR00T's server "
                   "yourself, in its own environment; policy.server_hint says how)")
    if transport != "gr00t" and "reply" in raw:
        check.fail("reply", "set", "only with transport = 'gr00t'")
    track = check.choice(raw, "track", TRACKS, "", default="rgb")
    request = check.table(raw, "request", required=False)
    gr00t: Gr00tLayout | None = None
    state_options: dict[str, str] = {}
    if transport == "gr00t":
        if track != "rgb":
            check.fail("track", repr(track), "'rgb' with transport = 'gr00t' (GR00T's state keys "
                       "are declared constants under [request.state])")
        gr00t, state_options = _gr00t_layout(check, request, check.table(raw, "reply"))
    profile = Profile(
        name=name,
        source=source,
        sha256=sha256_bytes(data),
        description=str(raw.get("description", "")),
        infrastructure=check.boolean(raw, "infrastructure", "", default=False),
        track=track,
        transport=transport,
        factory=factory,
        options=dict(options),
        budget_mode=check.choice(budget, "mode", BUDGET_MODES, "budget.", default="horizon"),
        replan_interval=check.integer(
            budget, "replan_interval", "budget.", default=DEFAULT_REPLAN_INTERVAL, minimum=1
        ),
        max_policy_calls=check.integer(
            budget, "max_policy_calls", "budget.", default=DEFAULT_MAX_POLICY_CALLS, minimum=1
        ),
        stop_rule=StopRule(consecutive or None),
        endpoint=endpoint,
        connect_timeout=check.seconds(policy, "connect_timeout", "policy.", default=10.0),
        call_timeout=check.seconds(policy, "call_timeout", "policy.", default=60.0),
        wait_s=check.seconds(policy, "wait_s", "policy.", default=30.0),
        server_hint=check.string(policy, "server_hint", "policy.") if "server_hint" in policy else "",
        out_of_bounds=check.choice(action, "out_of_bounds", OUT_OF_BOUNDS_MODES, "action.", default="error"),
        layout=_layout(check, request) if transport != "gr00t" else RequestLayout(),
        launch=_launch(check, raw.get("launch"), source),
        gr00t=gr00t,
        state_options=state_options,
        api_token_env=(check.string(policy, "api_token_env", "policy.")
                       if "api_token_env" in policy else None),
        wire=check.choice(policy, "wire", WIRE_SETTINGS, "policy.", default="auto"),
    )
    if gr00t is not None:
        profile = replace(profile, gr00t=replace(
            gr00t, state=_state_from_options(profile, gr00t.state, profile.options)))
    return profile


def _gr00t_layout(check: _Checker, table: Mapping[str, Any],
                  reply: Mapping[str, Any]) -> tuple[Gr00tLayout, dict[str, str]]:
    """[request] and [reply] of a gr00t profile; every key is required but the axes."""
    check.keys(table, _GR00T_REQUEST_KEYS, "request.")
    check.keys(reply, _REPLY_KEYS, "reply.")
    state: dict[str, np.ndarray] = {}
    options: dict[str, str] = {}
    for key, spec in check.table(table, "state", required=False).items():
        where = f"request.state.{key}"
        if not isinstance(spec, dict) or not {"dtype", "values"} <= set(spec) <= {
                "dtype", "values", "option"}:
            check.fail(where, repr(spec), "{ dtype = 'float32', values = [...], option = "
                       "'NAME' (optional: a policy option that replaces the values) }")
        state[key] = _constant(check, where, spec)
        if "option" in spec:
            options[key] = check.string(spec, "option", f"{where}.")
    actions = reply.get("actions")
    if not isinstance(actions, list) or not all(isinstance(a, str) and a for a in actions):
        check.fail("reply.actions", repr(actions), "a list of the 7 reply keys that form the "
                   "action columns in order (x y z roll pitch yaw gripper)")
    gripper = check.choice(reply, "gripper", tuple(GRIPPER_TRANSFORMS), "reply.", default="none")
    try:
        layout = Gr00tLayout(
            images={camera: check.string(table, camera, "request.")
                    for camera in ("agentview", "robot0_eye_in_hand")},
            language=check.string(table, "language", "request."),
            actions=tuple(actions),
            gripper=gripper,
            batch=check.boolean(table, "batch", "request.", default=True),
            time=check.boolean(table, "time", "request.", default=True),
            state=state,
        )
    except ValueError as exc:
        check.fail("[request]/[reply]", str(exc), "one key per input, 7 action keys")
    return layout, options


def _constant(check: _Checker, where: str, spec: Mapping[str, Any]) -> np.ndarray:
    if spec["dtype"] not in _CONSTANT_DTYPES:
        check.fail(f"{where}.dtype", repr(spec["dtype"]), ", ".join(_CONSTANT_DTYPES))
    try:
        return np.asarray(spec["values"], dtype=spec["dtype"])
    except (TypeError, ValueError, OverflowError) as exc:
        check.fail(f"{where}.values", repr(spec["values"]), f"numbers ({exc})")


def _state_from_options(profile: Profile, state: Mapping[str, np.ndarray],
                        options: Mapping[str, Any]) -> dict[str, np.ndarray]:
    """The state constants with the operator's option values in place of the defaults;
    an option no state key names is refused (a typo must not pass as a zero)."""
    unknown = sorted(set(options) - set(profile.state_options.values()))
    if unknown:
        allowed = ", ".join(sorted(profile.state_options.values())) or "none"
        raise SetupError(f"profile {profile.name!r} ({profile.source}): policy option "
                         f"{unknown[0]!r} names no state constant; allowed: {allowed}")
    resolved = dict(state)
    for key, option in profile.state_options.items():
        if option not in options:
            continue
        default = state[key]
        text = options[option]
        try:
            values = [float(v) for v in str(text).split(",")]
        except ValueError:
            values = []
        if len(values) != default.size:
            raise SetupError(
                f"--libero-policy-option {option}={text!r} (profile {profile.name!r}, state key "
                f"{key!r}): give {default.size} comma-separated number(s), e.g. the dataset "
                "mean from the checkpoint's statistics file"
            )
        resolved[key] = np.asarray(values, dtype=default.dtype).reshape(default.shape)
    return resolved


def _layout(check: _Checker, table: Mapping[str, Any]) -> RequestLayout:
    check.keys(table, _REQUEST_KEYS, "request.")
    default = RequestLayout()
    images = {
        camera: check.string(table, camera, "request.") if camera in table else key
        for camera, key in default.images.items()
    }
    constants: dict[str, np.ndarray] = {}
    for key, spec in check.table(table, "constants", required=False).items():
        where = f"request.constants.{key}"
        if not isinstance(spec, dict) or set(spec) != {"dtype", "values"}:
            check.fail(where, repr(spec), "{ dtype = 'float32', values = [...] }")
        constants[key] = _constant(check, where, spec)
    try:
        return RequestLayout(
            images=images,
            language=check.string(table, "language", "request.") if "language" in table else default.language,
            proprio=check.string(table, "proprio", "request.") if "proprio" in table else default.proprio,
            counters=check.boolean(table, "counters", "request.", default=False),
            constants=constants,
        )
    except ValueError as exc:
        check.fail("[request]", str(exc), "one key per input")


def _launch(check: _Checker, table: Any, source: str) -> Launch | None:
    if table is None:
        return None
    if not isinstance(table, dict):
        check.fail("launch", type(table).__name__, "a [launch] table")
    check.keys(table, _LAUNCH_KEYS, "launch.")
    command = table.get("command")
    if not isinstance(command, list) or not command or not all(isinstance(a, str) for a in command):
        check.fail("launch.command", repr(command), "a non-empty list of strings")
    env = check.table(table, "env", required=False)
    if not all(isinstance(v, str) for v in env.values()):
        check.fail("launch.env", repr(dict(env)), "string values")
    if "cwd" in table:
        check.string(table, "cwd", "launch.")
    base = Path(source).parent if not source.startswith("builtin:") else Path.cwd()
    return Launch(
        command=tuple(command),
        cwd=str((base / str(table.get("cwd", "."))).resolve()),
        env=dict(env),
        startup_timeout=check.seconds(table, "startup_timeout", "launch.", default=120.0),
    )


class _Checker:
    """Typed reads from a TOML table, each failure naming file, key and what is allowed."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, got: str, allowed: str) -> NoReturn:
        raise SetupError(f"profile {self.source}: {key} is {got}; allowed: {allowed}")

    def keys(self, table: Mapping[str, Any], allowed: set[str], prefix: str) -> None:
        unknown = sorted(set(table) - allowed)
        if unknown:
            self.fail(f"{prefix}{unknown[0]}", "not a known key", ", ".join(sorted(allowed)))

    def table(self, table: Mapping[str, Any], key: str, required: bool = True) -> Mapping[str, Any]:
        value = table.get(key)
        if value is None:
            if required:
                self.fail(key, "missing", f"a [{key}] table")
            return {}
        if not isinstance(value, dict):
            self.fail(key, type(value).__name__, f"a [{key}] table")
        return value

    def string(self, table: Mapping[str, Any], key: str, prefix: str) -> str:
        value = table.get(key)
        if not isinstance(value, str) or not value:
            self.fail(f"{prefix}{key}", repr(value), "a non-empty string")
        return str(value)

    def boolean(self, table: Mapping[str, Any], key: str, prefix: str, *, default: bool) -> bool:
        value = table.get(key, default)
        if not isinstance(value, bool):
            self.fail(f"{prefix}{key}", repr(value), "true or false")
        return bool(value)

    def integer(
        self, table: Mapping[str, Any], key: str, prefix: str, *, default: int, minimum: int
    ) -> int:
        value = table.get(key, default)
        if not isinstance(value, int) or isinstance(value, bool) or value < minimum:
            self.fail(f"{prefix}{key}", repr(value), f"an integer >= {minimum}")
        return int(value)

    def seconds(self, table: Mapping[str, Any], key: str, prefix: str, *, default: float) -> float:
        value = table.get(key, default)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
            self.fail(f"{prefix}{key}", repr(value), "a positive number of seconds")
        return float(value)

    def choice(
        self,
        table: Mapping[str, Any],
        key: str,
        allowed: tuple[str, ...],
        prefix: str,
        *,
        default: str,
    ) -> str:
        value = table.get(key, default)
        if value not in allowed:
            self.fail(f"{prefix}{key}", repr(value), ", ".join(allowed))
        return str(value)
