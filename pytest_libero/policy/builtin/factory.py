"""Building an in-process policy from ``module:callable`` and ``KEY=VALUE`` options.

Shared by profiles (``policy.factory``) and the serving command (``--policy``), so a
factory is imported, called and refused the same way everywhere.
"""

from __future__ import annotations

import inspect
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import import_module
from typing import Any

from pytest_libero.policy.contract import Policy
from pytest_libero.policy.errors import MetadataTooLarge
from pytest_libero.policy.limits import check_metadata
from pytest_libero.policy.transport import OnWait, ServedProfile, TableReader
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.text import echo, mentioning


def build_inprocess(
    factory_path: str, options: Mapping[str, Any], owner: str, *, out_of_bounds: str | None = None
) -> Any:
    """Import ``module:callable`` and call it with the options.

    A factory with an ``out_of_bounds`` parameter is told the run's rule, so a policy
    that reads its actions from a file (replay) can check them as the run will.
    """
    module, _, attribute = factory_path.partition(":")
    try:
        factory = getattr(import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise SetupError(
            f"{owner}: policy.factory {factory_path!r} cannot be imported ({exc}); "
            "give an importable 'module:callable'"
        ) from exc
    if out_of_bounds is not None and _takes(factory, "out_of_bounds"):
        options = {**options, "out_of_bounds": out_of_bounds}
    try:
        policy = factory(**options)
    except (TypeError, ValueError, OSError) as exc:
        why = str(exc)  # it names the option at fault, a long name echoed
        for key in options:
            why = mentioning(why, key)
        raise SetupError(f"{owner}: {factory_path} rejected the policy options: {why}") from exc
    if not isinstance(policy, Policy):
        missing = [m for m in ("metadata", "reset", "infer", "close") if not hasattr(policy, m)]
        raise SetupError(
            f"{owner}: {factory_path} returned a {type(policy).__name__}, not a policy (it "
            f"lacks {', '.join(missing)}); the factory must return an object with metadata, "
            "reset(), infer(observation) and close()"
        )
    try:
        check_metadata(policy.metadata, f"{owner}: {factory_path}")
    except MetadataTooLarge as exc:
        raise SetupError(str(exc)) from None
    return policy


def _takes(factory: Any, name: str) -> bool:
    try:
        return name in inspect.signature(factory).parameters
    except (TypeError, ValueError):  # a builtin without a signature
        return False


def parse_policy_options(items: list[str] | None) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for item in items or []:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise SetupError(f"--libero-policy-option {echo(item)}: write KEY=VALUE")
        options[key.strip()] = _scalar(text.strip())
    return options


def _scalar(text: str) -> Any:
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)


@dataclass(frozen=True)
class InprocessSettings:
    """An in-process profile's policy: the factory its options are passed to."""

    factory: str


class InprocessTransport:
    """The policy runs in the case's own process, built by ``policy.factory``."""

    name = "inprocess"
    served = False
    server_kind = "an in-process"
    schemes: tuple[str, ...] = ()
    policy_keys = frozenset({"factory", "options"})
    tables: frozenset[str] = frozenset()
    episode_start_calls = 0

    def read(self, reader: TableReader, raw: Mapping[str, Any]) -> InprocessSettings:
        factory = reader.string(raw["policy"], "factory", "policy.")
        if ":" not in factory:
            reader.fail("policy.factory", f"{factory!r}", "'module:callable'")
        return InprocessSettings(factory)

    def with_options(self, profile: ServedProfile, options: Mapping[str, Any]) -> Any:
        return profile.settings  # the options go to the factory as they are

    def endpoint_problem(self, endpoint: str) -> str | None:
        return "the profile runs its policy in-process; an endpoint needs a served profile"

    def feeds_constants(self, settings: Any) -> bool:
        return False

    def build(self, profile: ServedProfile) -> Policy:
        settings: InprocessSettings = profile.settings
        policy: Policy = build_inprocess(settings.factory, profile.options,
                                         f"profile {profile.name!r} ({profile.source})",
                                         out_of_bounds=profile.out_of_bounds)
        return policy

    def preflight(self, profile: ServedProfile, on_wait: OnWait | None) -> dict[str, Any]:
        return {}

    def answering(self, profile: ServedProfile) -> None:
        return None

    def describe(self, settings: Any) -> dict[str, Any]:
        return {"factory": settings.factory}


INPROCESS = InprocessTransport()
