"""Benchmark adapters, by name or ``module:factory``; only adapters touch a simulator.

The simulator module is imported only when an adapter is built, never at collection or
``pytest --help``. ``base.py`` says what an adapter must provide.
"""

from __future__ import annotations

from importlib import import_module
from typing import Any, cast

from pytest_libero.adapters.base import ADAPTER_METHODS, BenchmarkAdapter, missing_members
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.text import ECHO_LIMIT, echo, mentioning

BUILT_IN = {"libero": "pytest_libero.adapters.libero:LiberoBenchmarkAdapter"}


def load_adapter(name: str) -> BenchmarkAdapter:
    """Build the adapter named ``libero`` or ``module:factory``, checked against
    :class:`~pytest_libero.adapters.base.BenchmarkAdapter`.

    Raises SetupError naming the adapter and what is wrong with it.
    """
    target = BUILT_IN.get(name) or (name if ":" in name else None)
    if target is None:
        raise SetupError(f"--libero-adapter={echo(name)}: no such adapter; give "
                         f"{', '.join(sorted(BUILT_IN))} or module:factory")
    module, _, attribute = target.partition(":")
    try:
        factory: Any = getattr(import_module(module), attribute)
    except (ImportError, AttributeError) as exc:
        raise SetupError(f"--libero-adapter={echo(name)}: cannot import {_named(target)} "
                         f"({mentioning(str(exc), module)}); give an importable module:factory"
                         ) from exc
    adapter = factory()
    missing = missing_members(adapter, ADAPTER_METHODS)
    if missing:
        raise SetupError(
            f"--libero-adapter={echo(name)}: {_named(target)}() returned a {type(adapter).__name__} "
            f"without {', '.join(missing)}; a benchmark adapter needs open(entry, *, track, "
            "control_cap, render, video_stride) returning an episode "
            "(see pytest_libero/adapters/base.py)"
        )
    return cast(BenchmarkAdapter, adapter)


class AdapterCache:
    """The adapters one process built, by name, kept across its cases: a long-lived
    case process (``episode/host/child.py``) uses one, so that an environment an adapter
    holds for the task's next state (full mode) is there for it."""

    def __init__(self) -> None:
        self.built: dict[str, BenchmarkAdapter] = {}

    def get(self, name: str) -> BenchmarkAdapter:
        adapter = self.built.get(name)
        if adapter is None:
            adapter = self.built[name] = load_adapter(name)
        return adapter


def _named(target: str) -> str:
    """The factory as a message names it beside the option's echo: whole when short, else
    "it" (the echo already quotes it)."""
    return target if len(target) <= ECHO_LIMIT else "it"
