"""How a profile reaches its policy: one interface, one class per transport.

A transport owns everything that differs between reaching a policy in-process, over
openpi's websocket or over GR00T's ZeroMQ server: which profile keys and tables it
reads, how it checks an endpoint, how it builds the policy object, how it tells before
any case that a server answers as it must (``preflight``) and before each case that it
still answers at all (``answering``), and what of it goes into the profile's identity.
Code outside a transport's own module asks the transport; it never tests the name.

Implementations live beside their clients, one in each family's package
(``policy.builtin.factory``, ``policy.openpi.transport``, ``policy.gr00t.transport``),
and are found through :func:`transport_named`, which imports a transport's module only
when a profile names it (pyzmq only for gr00t profiles).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from importlib import import_module
from typing import Any, NoReturn, Protocol

import numpy as np

from pytest_libero.policy.contract import Policy
from pytest_libero.policy.errors import ServerUnavailable

__all__ = [
    "TRANSPORT_NAMES",
    "OnWait",
    "ServedProfile",
    "TableReader",
    "Transport",
    "constant_array",
    "read_constant",
    "transport_named",
]

_IMPLEMENTATIONS = {
    "inprocess": "pytest_libero.policy.builtin.factory:INPROCESS",
    "websocket": "pytest_libero.policy.openpi.transport:WEBSOCKET",
    "gr00t": "pytest_libero.policy.gr00t.transport:GR00T",
    "vla-eval": "pytest_libero.policy.vla_eval.transport:VLA_EVAL",
}
TRANSPORT_NAMES = tuple(_IMPLEMENTATIONS)
"""What a profile's ``policy.transport`` may say."""

OnWait = Callable[[ServerUnavailable], None]


class TableReader(Protocol):
    """Typed reads from a profile's TOML tables; each failure names the file, the key and
    what is allowed (config.profiles supplies it)."""

    def fail(self, key: str, got: str, allowed: str) -> NoReturn: ...
    def keys(self, table: Mapping[str, Any], allowed: set[str], prefix: str) -> None: ...
    def table(self, table: Mapping[str, Any], key: str,
              required: bool = True) -> Mapping[str, Any]: ...
    def string(self, table: Mapping[str, Any], key: str, prefix: str) -> str: ...
    def boolean(self, table: Mapping[str, Any], key: str, prefix: str, *,
                default: bool) -> bool: ...
    def choice(self, table: Mapping[str, Any], key: str, allowed: tuple[str, ...],
               prefix: str, *, default: str) -> str: ...


class ServedProfile(Protocol):
    """What a transport needs of a profile (config.profiles.Profile has it all)."""

    @property
    def name(self) -> str: ...
    @property
    def source(self) -> str: ...
    @property
    def transport(self) -> str: ...
    @property
    def endpoint(self) -> str | None: ...
    @property
    def wait_s(self) -> float: ...
    @property
    def connect_timeout(self) -> float: ...
    @property
    def call_timeout(self) -> float: ...
    @property
    def options(self) -> Mapping[str, Any]: ...
    @property
    def out_of_bounds(self) -> str: ...
    @property
    def settings(self) -> Any: ...
    @property
    def start_hint(self) -> str: ...


class Transport(Protocol):
    """One way of reaching a policy. A profile keeps what ``read`` returned as its
    ``settings``; every other method gets them back through the profile."""

    name: str
    served: bool
    """Whether the policy sits behind a server the plugin must find before any case."""
    server_kind: str
    """How a refusal names the server it expected ("an openpi", "a GR00T")."""
    schemes: tuple[str, ...]
    """Endpoint schemes it speaks, the first one the one to suggest; () in-process."""
    policy_keys: frozenset[str]
    """The ``[policy]`` keys it reads besides ``transport``."""
    tables: frozenset[str]
    """The profile's own tables it reads (``request``, ``reply``, ``launch``)."""
    episode_start_calls: int
    """Calls an episode start makes after the connection, each within call_timeout."""

    def read(self, reader: TableReader, raw: Mapping[str, Any]) -> Any:
        """Its settings from the profile's whole TOML document (``policy`` table included)."""
        ...

    def with_options(self, profile: ServedProfile, options: Mapping[str, Any]) -> Any:
        """Its settings once the operator's policy options apply (or SetupError)."""
        ...

    def endpoint_problem(self, endpoint: str) -> str | None:
        """Why ``endpoint`` is no address this transport speaks, or None."""
        ...

    def feeds_constants(self, settings: Any) -> bool:
        """Whether the settings send constants where a model expects state."""
        ...

    def build(self, profile: ServedProfile) -> Policy:
        """The policy object; a served one connects at its first episode."""
        ...

    def preflight(self, profile: ServedProfile, on_wait: OnWait | None) -> dict[str, Any]:
        """Before any case: what run.json records of the server (``policy_server``).

        Raises ServerUnavailable when nothing answers within ``wait_s``, SetupError for a
        server that answers but will not serve the cases (naming what was seen and the
        fix), and the transport's other errors for anything else it cannot read."""
        ...

    def answering(self, profile: ServedProfile) -> None:
        """Before a case: return when the server answers its cheapest probe, raise
        ServerUnavailable when nothing does within ``wait_s``."""
        ...

    def describe(self, settings: Any) -> dict[str, Any]:
        """What of the settings goes into the profile's identity (run.json)."""
        ...


def transport_named(name: str) -> Transport:
    """The transport a profile's ``policy.transport`` names (KeyError when none)."""
    module, _, attribute = _IMPLEMENTATIONS[name].partition(":")
    transport: Transport = getattr(import_module(module), attribute)
    return transport


CONSTANT_DTYPES = ("float32", "float64", "int32", "int64", "uint8")


def constant_array(values: Any, dtype: str) -> np.ndarray:
    """Declared constant values as an array of ``dtype``, exactly, or ValueError saying
    what is wrong: not a non-empty list of numbers, not finite, not whole for an integer
    dtype, or not representable in the dtype (1e39 as float32 would become infinity)."""
    if not isinstance(values, list) or not values:
        raise ValueError("give a non-empty list of numbers")
    if not all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        raise ValueError("give numbers only")
    wide = np.asarray(values, dtype=np.float64)
    if not np.isfinite(wide).all():
        raise ValueError("give finite numbers (no NaN or infinity)")
    kind = np.dtype(dtype)
    if kind.kind in "iu":
        limits = np.iinfo(kind)
        if not all(float(v).is_integer() for v in values):
            raise ValueError(f"give whole numbers for {dtype} (no fractions: they would be cut)")
        if any(not limits.min <= int(v) <= limits.max for v in values):
            raise ValueError(f"give numbers within {dtype}'s range {limits.min}..{limits.max}")
        return np.asarray([int(v) for v in values], dtype=kind)
    with np.errstate(over="ignore"):
        array = wide.astype(kind)
    if not np.isfinite(array).all():
        raise ValueError(f"give numbers within {dtype}'s range (±{np.finfo(kind).max:.3g})")
    return array


def read_constant(reader: TableReader, where: str, spec: Mapping[str, Any]) -> np.ndarray:
    """A declared constant input (``{ dtype = "float32", values = [...] }``) as an array."""
    if spec["dtype"] not in CONSTANT_DTYPES:
        reader.fail(f"{where}.dtype", repr(spec["dtype"]), ", ".join(CONSTANT_DTYPES))
    try:
        return constant_array(spec["values"], spec["dtype"])
    except ValueError as exc:
        reader.fail(f"{where}.values", repr(spec["values"]), str(exc))
