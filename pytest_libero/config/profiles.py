"""Model profiles: what a model needs (transport, request keys, track, budgets, stop rule).

A profile describes the model, not the operator. It is a TOML file, shipped ones in
``pytest_libero/data/profiles`` or any path; every key is validated on load and an
error names the file, the key and what is allowed. The profile's bytes are hashed
into the run's identity.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NoReturn

import numpy as np

from pytest_libero.data import data_path
from pytest_libero.policy.contract import OUT_OF_BOUNDS_MODES
from pytest_libero.policy.factory import build_inprocess
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

TRANSPORTS = ("inprocess", "websocket")
_TOP_KEYS = {"name", "description", "infrastructure", "track", "policy", "request", "launch",
             "budget", "stop", "action"}
_POLICY_KEYS = {"transport", "factory", "options", "endpoint", "connect_timeout", "call_timeout",
                "wait_s", "server_hint"}
_ACTION_KEYS = {"out_of_bounds"}
_REQUEST_KEYS = {"agentview", "robot0_eye_in_hand", "language", "proprio", "counters", "constants"}
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
        served = self.transport == "websocket"
        if options:
            if served:
                raise SetupError(f"--libero-policy-option: profile {self.name!r} is served "
                                 "(transport websocket); its options belong to the server")
            changes["options"] = {**self.options, **options}
        if endpoint is not None:
            if not served:
                raise SetupError(f"--libero-endpoint: profile {self.name!r} runs its policy "
                                 "in-process; an endpoint needs a websocket profile")
            if (problem := address_problem(endpoint)) is not None:
                raise SetupError(f"--libero-endpoint: {problem}; give ws://HOST:PORT")
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
            "factory": self.factory or None,
            "options": {k: str(v) for k, v in self.options.items()},
            "endpoint": self.endpoint,
            "request_layout": self.layout.describe() if self.transport == "websocket" else None,
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
        for key in ("endpoint", "connect_timeout", "call_timeout", "wait_s", "server_hint"):
            if key in policy:
                check.fail(f"policy.{key}", "set", "only with transport = 'websocket'")
    else:
        factory = ""
        if "factory" in policy or "options" in policy:
            check.fail("policy.factory", "set", "only with transport = 'inprocess'")
    endpoint = policy.get("endpoint")
    if endpoint is not None and address_problem(endpoint) is not None:
        check.fail("policy.endpoint", repr(endpoint), "a ws://HOST:PORT address")
    options = check.table(policy, "options", required=False)
    budget = check.table(raw, "budget", required=False)
    check.keys(budget, _BUDGET_KEYS, "budget.")
    stop = check.table(raw, "stop", required=False)
    check.keys(stop, _STOP_KEYS, "stop.")
    consecutive = check.integer(stop, "consecutive", "stop.", default=0, minimum=0)
    action = check.table(raw, "action", required=False)
    check.keys(action, _ACTION_KEYS, "action.")
    if transport == "inprocess" and ("request" in raw or "launch" in raw):
        check.fail("request/launch", "set", "only with transport = 'websocket'")
    return Profile(
        name=name,
        source=source,
        sha256=sha256_bytes(data),
        description=str(raw.get("description", "")),
        infrastructure=check.boolean(raw, "infrastructure", "", default=False),
        track=check.choice(raw, "track", TRACKS, "", default="rgb"),
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
        layout=_layout(check, check.table(raw, "request", required=False)),
        launch=_launch(check, raw.get("launch"), source),
    )


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
        if spec["dtype"] not in _CONSTANT_DTYPES:
            check.fail(f"{where}.dtype", repr(spec["dtype"]), ", ".join(_CONSTANT_DTYPES))
        try:
            constants[key] = np.asarray(spec["values"], dtype=spec["dtype"])
        except (TypeError, ValueError, OverflowError) as exc:
            check.fail(f"{where}.values", repr(spec["values"]), f"numbers ({exc})")
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
