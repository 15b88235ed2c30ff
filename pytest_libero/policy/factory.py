"""Building an in-process policy from ``module:callable`` and ``KEY=VALUE`` options.

Shared by profiles (``policy.factory``) and the serving command (``--policy``), so a
factory is imported, called and refused the same way everywhere.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib import import_module
from typing import Any

from pytest_libero.protocol.errors import SetupError


def build_inprocess(factory_path: str, options: Mapping[str, Any], owner: str) -> Any:
    """Import ``module:callable`` and call it with the options."""
    module, _, attribute = factory_path.partition(":")
    try:
        factory = getattr(import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise SetupError(
            f"{owner}: policy.factory {factory_path!r} cannot be imported ({exc}); "
            "give an importable 'module:callable'"
        ) from exc
    try:
        return factory(**options)
    except (TypeError, ValueError, OSError) as exc:
        raise SetupError(
            f"{owner}: {factory_path} rejected the policy options {dict(options)}: {exc}"
        ) from exc


def parse_policy_options(items: list[str] | None) -> dict[str, Any]:
    options: dict[str, Any] = {}
    for item in items or []:
        key, sep, text = item.partition("=")
        if not sep or not key.strip():
            raise SetupError(f"--libero-policy-option {item!r}: write KEY=VALUE")
        options[key.strip()] = _scalar(text.strip())
    return options


def _scalar(text: str) -> Any:
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return {"true": True, "false": False}.get(text.lower(), text)
