"""Benchmark adapters, looked up by name; only adapters touch a simulator.

The registry maps a name to a factory so the simulator module is imported only when
an adapter is actually built, never at collection or ``pytest --help``.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import import_module
from typing import Any

_REGISTRY: dict[str, str] = {
    "libero": "pytest_libero.adapters.libero:LiberoBenchmarkAdapter",
}


def register(name: str, target: str) -> None:
    """Register ``module:attribute`` under ``name`` (for third-party benchmarks)."""
    _REGISTRY[name] = target


def names() -> list[str]:
    return sorted(_REGISTRY)


def get_adapter(name: str) -> Any:
    """Build the adapter registered under ``name``, or named as ``module:factory``."""
    target = _REGISTRY.get(name) or (name if ":" in name else None)
    if target is None:
        raise KeyError(f"no adapter named {name!r}; registered: {', '.join(names())}, "
                       "or give module:factory")
    module, _, attribute = target.partition(":")
    factory: Callable[[], Any] = getattr(import_module(module), attribute)
    return factory()
