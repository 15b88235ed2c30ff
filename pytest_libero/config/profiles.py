"""Model profiles: what a model needs (transport, request keys, track, budgets, stop rule).

A profile describes the model, not the operator. It is a TOML file, shipped ones in
``pytest_libero/data/profiles`` or any path; every key is validated on load and an
error names the file, the key and what is allowed. The profile's bytes are hashed
into the run's identity.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, NoReturn

from pytest_libero.catalog.case_id import CaseId
from pytest_libero.config.numbers import seconds
from pytest_libero.data import data_path
from pytest_libero.files import folder_name_problem
from pytest_libero.policy.contract import OUT_OF_BOUNDS_MODES
from pytest_libero.policy.openpi.launcher import Launch
from pytest_libero.policy.transport import TRANSPORT_NAMES, Transport, transport_named
from pytest_libero.protocol.budgets import StopRule
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.hashing import sha256_bytes
from pytest_libero.protocol.parameters import (
    BUDGET_MODES,
    DEFAULT_MAX_POLICY_CALLS,
    DEFAULT_REPLAN_INTERVAL,
    TRACKS,
)
from pytest_libero.protocol.shipped import DamagedInstall, damaged, shipped_bytes
from pytest_libero.protocol.text import echo, mentioning

_TOP_KEYS = {"name", "description", "infrastructure", "track", "policy", "budget", "stop",
             "action", "selection"}
_SERVED_KEYS = {"endpoint", "connect_timeout", "call_timeout", "wait_s", "server_hint"}
"""[policy] keys every served transport reads (the transport adds its own)."""
_TRANSPORT_TABLES = {"request", "reply", "launch"}
_ACTION_KEYS = {"out_of_bounds"}
STATE_FED = ("proprio", "constant", "none")
"""What a run's profile fed a model as its state: the simulator's proprio vector (the
rgb+proprio track), declared constants, or nothing."""

_LAUNCH_KEYS = {"command", "cwd", "env", "startup_timeout"}
_BUDGET_KEYS = {"mode", "replan_interval", "max_policy_calls"}
_STOP_KEYS = {"consecutive"}
_SELECTION_KEYS = {"tasks"}


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
    settings: Any
    """What the transport read from the profile (``Transport.read``): its request layout,
    reply mapping, factory; only the transport looks inside."""
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
    launch: Launch | None = None
    tasks: tuple[str, ...] = ()
    """The profile's own selection (``[selection] tasks``, task ids like
    ``libero_object-00``): what ``--libero-scope=profile`` runs, and the default scope
    when the profile names any (the demo profile's recorded tasks)."""

    @property
    def transport_impl(self) -> Transport:
        return transport_named(self.transport)

    @property
    def served(self) -> bool:
        """Whether the policy sits behind a server the plugin must find before any case."""
        return self.transport_impl.served

    @property
    def state_fed(self) -> str:
        """What this profile feeds as state: ``proprio``, ``constant`` or ``none``."""
        if self.track == "rgb+proprio":
            return "proprio"
        if self.transport_impl.feeds_constants(self.settings):
            return "constant"
        return "none"

    @property
    def policy_label(self) -> str:
        """The policy in a few words: its endpoint, or its in-process factory."""
        described = self.transport_impl.describe(self.settings)
        return self.endpoint or f"in-process policy {described.get('factory', self.name)}"

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
        transport = self.transport_impl
        if options:
            changes["options"] = {**self.options, **options}
            changes["settings"] = transport.with_options(self, changes["options"])
        if endpoint is not None:
            if not transport.served:
                raise SetupError(f"--libero-endpoint: profile {self.name!r} runs its policy "
                                 "in-process; an endpoint needs a websocket profile (or a gr00t "
                                 "one)")
            problem = transport.endpoint_problem(endpoint)
            if problem is not None:
                raise SetupError(f"--libero-endpoint: {mentioning(problem, endpoint)}; give "
                                 f"{transport.schemes[0]}HOST:PORT")
            changes["endpoint"] = endpoint
        if call_timeout is not None:
            changes["call_timeout"] = call_timeout
        if wait_s is not None:
            changes["wait_s"] = wait_s
        if out_of_bounds is not None:
            if out_of_bounds not in OUT_OF_BOUNDS_MODES:
                raise SetupError(f"--libero-out-of-bounds={echo(out_of_bounds)}; allowed: "
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
        return self.transport_impl.build(self)

    def identity(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "description": self.description,
            "source": self.source,
            "sha256": self.sha256,
            "infrastructure": self.infrastructure,
            "track": self.track,
            "transport": self.transport,
            "factory": None,
            "request_layout": None,
            **self.transport_impl.describe(self.settings),
            "options": {k: str(v) for k, v in self.options.items()},
            "endpoint": self.endpoint,
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
        try:
            data = path.read_bytes()
        except OSError as exc:  # missing, a folder, a name too long for the file system
            why = "" if isinstance(exc, (FileNotFoundError, IsADirectoryError)) else f" ({exc.strerror})"
            raise SetupError(f"--libero-profile: no profile file at {path}{why}") from None
        return parse_profile(data, str(path.resolve()))
    if name_or_path not in builtin_names():
        raise SetupError(
            f"--libero-profile={echo(name_or_path)} is not a shipped profile; "
            f"shipped: {', '.join(builtin_names())}, or give a path to a .toml file"
        )
    try:  # a shipped profile that does not parse: the installation is damaged
        return parse_profile(shipped_bytes(f"profiles/{name_or_path}.toml"), f"builtin:{name_or_path}")
    except DamagedInstall:
        raise
    except SetupError as exc:
        raise damaged(f"profiles/{name_or_path}.toml", str(exc)) from None


def parse_profile(data: bytes, source: str) -> Profile:
    try:
        raw = tomllib.loads(data.decode())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise SetupError(f"profile {source}: not valid TOML: {exc}") from exc
    check = _Checker(source)
    check.keys(raw, _TOP_KEYS | _TRANSPORT_TABLES, "")
    name = check.string(raw, "name", "")
    problem = folder_name_problem(name)
    if problem is not None:  # the name is the folder its runs go in (<root>/<name>/<run>)
        check.fail("name", repr(name)[:60], f"a name for one folder, like 'my-model' ({problem})")
    policy = check.table(raw, "policy")
    transport_name = check.choice(policy, "transport", TRANSPORT_NAMES, "policy.",
                                  default="inprocess")
    transport = transport_named(transport_name)
    _only_what_the_transport_reads(check, raw, policy, transport)
    endpoint = policy.get("endpoint")
    if endpoint is not None and (not isinstance(endpoint, str)
                                 or transport.endpoint_problem(endpoint) is not None):
        check.fail("policy.endpoint", repr(endpoint), f"a {transport.schemes[0]}HOST:PORT address")
    options = check.table(policy, "options", required=False)
    budget = check.table(raw, "budget", required=False)
    check.keys(budget, _BUDGET_KEYS, "budget.")
    stop = check.table(raw, "stop", required=False)
    check.keys(stop, _STOP_KEYS, "stop.")
    consecutive = check.integer(stop, "consecutive", "stop.", default=0, minimum=0)
    action = check.table(raw, "action", required=False)
    check.keys(action, _ACTION_KEYS, "action.")
    track = check.choice(raw, "track", TRACKS, "", default="rgb")
    profile = Profile(
        name=name,
        source=source,
        sha256=sha256_bytes(data),
        description=str(raw.get("description", "")),
        infrastructure=check.boolean(raw, "infrastructure", "", default=False),
        track=track,
        transport=transport_name,
        settings=transport.read(check, {**raw, "policy": policy}),
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
        launch=_launch(check, raw.get("launch"), source),
        tasks=_tasks(check, check.table(raw, "selection", required=False)),
    )
    if profile.options:
        profile = replace(profile, settings=transport.with_options(profile, profile.options))
    return profile


def _only_what_the_transport_reads(check: _Checker, raw: Mapping[str, Any],
                                   policy: Mapping[str, Any], transport: Transport) -> None:
    """A key or table the profile's transport does not read is refused, naming which
    transports read it, so a gr00t key in a websocket profile is not silently ignored."""
    readers = {name: transport_named(name) for name in TRANSPORT_NAMES}

    def reads(other: Transport) -> set[str]:
        return set(other.policy_keys) | (_SERVED_KEYS if other.served else set())

    known = {"transport"}.union(*(reads(t) for t in readers.values()))
    check.keys(policy, known, "policy.")
    for key in sorted(set(policy) - reads(transport) - {"transport"}):
        who = " or ".join(repr(n) for n, t in readers.items() if key in reads(t))
        check.fail(f"policy.{key}", "set", f"only with transport = {who}")
    for table in sorted((_TRANSPORT_TABLES & set(raw)) - transport.tables):
        who = " or ".join(repr(n) for n, t in readers.items() if table in t.tables)
        check.fail(table, "set", f"only with transport = {who}")


def _tasks(check: _Checker, table: Mapping[str, Any]) -> tuple[str, ...]:
    """``[selection] tasks``: native task ids, each once (the catalog checks they exist)."""
    check.keys(table, _SELECTION_KEYS, "selection.")
    if "tasks" not in table:
        return ()
    tasks = table["tasks"]
    allowed = 'a non-empty list of task ids, each once, like ["libero_object-00", "libero_10-03"]'
    if not isinstance(tasks, list) or not tasks or not all(isinstance(t, str) for t in tasks):
        check.fail("selection.tasks", repr(tasks)[:60], allowed)
    for task in tasks:
        try:
            case = CaseId.parse(task)
        except ValueError:
            case = None
        if case is None or case != case.task or tasks.count(task) > 1:
            check.fail("selection.tasks", f"{task!r} in it", allowed)
    return tuple(tasks)


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
        if isinstance(value, str):  # a number, not a string that reads as one
            self.fail(f"{prefix}{key}", repr(value)[:40], "a positive number of seconds")
        try:
            return seconds(value)
        except ValueError as exc:
            self.fail(f"{prefix}{key}", repr(value)[:40], str(exc))

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
