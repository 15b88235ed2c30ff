"""Model profiles: what a model needs (transport, track, budgets, stop rule).

A profile describes the model, not the operator. It is a TOML file, shipped ones in
``pytest_libero/data/profiles`` or any path; every key is validated on load and an
error names the file, the key and what is allowed. The profile's bytes are hashed
into the run's identity.
"""

from __future__ import annotations

import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from importlib import import_module
from pathlib import Path
from typing import Any

from pytest_libero.data import data_path
from pytest_libero.episode import StopRule
from pytest_libero.errors import SetupError
from pytest_libero.identity import sha256_bytes
from pytest_libero.protocol import BUDGET_MODES, DEFAULT_MAX_POLICY_CALLS, DEFAULT_REPLAN_INTERVAL, TRACKS

TRANSPORTS = ("inprocess",)
_TOP_KEYS = {"name", "description", "infrastructure", "track", "policy", "budget", "stop"}
_POLICY_KEYS = {"transport", "factory", "options"}
_BUDGET_KEYS = {"mode", "replan_interval", "max_policy_calls"}
_STOP_KEYS = {"consecutive"}


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
    raw: Mapping[str, Any] = field(repr=False, default_factory=dict)

    def with_options(self, overrides: Mapping[str, Any]) -> Profile:
        """The same profile with operator-given policy options layered on top."""
        if not overrides:
            return self
        return Profile(**{**self.__dict__, "options": {**self.options, **overrides}})

    def build_policy(self) -> Any:
        """Instantiate the in-process policy the profile names."""
        module, _, attribute = self.factory.partition(":")
        try:
            factory = getattr(import_module(module), attribute)
        except (ImportError, AttributeError) as exc:
            raise SetupError(
                f"profile {self.name!r} ({self.source}): policy.factory {self.factory!r} "
                f"cannot be imported ({exc}); give an importable 'module:callable'"
            ) from exc
        try:
            return factory(**self.options)
        except (TypeError, ValueError, OSError) as exc:
            raise SetupError(
                f"profile {self.name!r} ({self.source}): {self.factory} rejected the policy "
                f"options {dict(self.options)}: {exc}"
            ) from exc

    def identity(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "source": self.source,
            "sha256": self.sha256,
            "infrastructure": self.infrastructure,
            "track": self.track,
            "transport": self.transport,
            "factory": self.factory,
            "options": {k: str(v) for k, v in self.options.items()},
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
    factory = check.string(policy, "factory", "policy.")
    if ":" not in factory:
        check.fail("policy.factory", f"{factory!r}", "'module:callable'")
    options = check.table(policy, "options", required=False)
    budget = check.table(raw, "budget", required=False)
    check.keys(budget, _BUDGET_KEYS, "budget.")
    stop = check.table(raw, "stop", required=False)
    check.keys(stop, _STOP_KEYS, "stop.")
    consecutive = check.integer(stop, "consecutive", "stop.", default=0, minimum=0)
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
        raw=raw,
    )


class _Checker:
    """Typed reads from a TOML table, each failure naming file, key and what is allowed."""

    def __init__(self, source: str) -> None:
        self.source = source

    def fail(self, key: str, got: str, allowed: str) -> None:
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
        return value  # type: ignore[no-any-return]

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
