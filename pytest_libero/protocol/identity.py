"""The protocol identity (P12), and the digests of the packaged catalog and inventory.

The protocol identity is a sha256 over a canonical JSON of everything that defines
what a result means: the catalog bytes, the inventory bytes and the fixed parameters
(source pin, suites, selection, P4-P9). It must not move when code is refactored; a
golden test pins it. The data files are hashed as bytes, straight from the package.
"""

from __future__ import annotations

from functools import cache

from pytest_libero.data import (
    CATALOG_FILE,
    INVENTORY_FILE,
    OOD_CATALOG_FILE,
    OOD_INVENTORY_FILE,
)
from pytest_libero.protocol.clock import realtime_parameters
from pytest_libero.protocol.hashing import canonical_json, sha256_bytes
from pytest_libero.protocol.parameters import full_schedule_parameters, protocol_parameters
from pytest_libero.protocol.shipped import shipped_bytes


@cache
def data_digests() -> dict[str, str]:
    """sha256 of the packaged catalog and inventory files."""
    return {
        "catalog_sha256": sha256_bytes(shipped_bytes(CATALOG_FILE)),
        "inventory_sha256": sha256_bytes(shipped_bytes(INVENTORY_FILE)),
    }


@cache
def protocol_identity(mode: str = "fast") -> str:
    """The digest that names this protocol; it changes only when the protocol does.

    Full mode has its own identity: the fast-mode payload plus its schedule, so a
    fast-mode identity never moves because full mode exists.
    """
    return identity_with("libero-protocol", {}, mode, "protocol")


@cache
def ood_identity(mode: str = "fast") -> str:
    """The identity of an OOD (LIBERO-PRO) case: its mode's protocol payload plus the OOD
    catalog and inventory, so native identities never move because OOD entries exist,
    and a changed OOD file never passes for the same evaluation."""
    return identity_with("libero-ood", {
        "ood_catalog_sha256": sha256_bytes(shipped_bytes(OOD_CATALOG_FILE)),
        "ood_inventory_sha256": sha256_bytes(shipped_bytes(OOD_INVENTORY_FILE)),
    }, mode, "OOD")


@cache
def realtime_identity(mode: str = "fast") -> str:
    """The realtime track's identity: its mode's protocol payload plus the clock's rule,
    so no realtime result passes for a synchronous one, nor the other way round."""
    return identity_with("libero-realtime", {"clock": realtime_parameters()}, mode, "realtime")


def identity_with(prefix: str, extra: dict[str, object], mode: str, what: str) -> str:
    """``<prefix>-v1:`` (full mode ``<prefix>-full-v1:``) and 32 hex of the canonical
    JSON of the catalog and inventory digests, the protocol parameters, ``extra`` and,
    in full mode, the schedule: one recipe for every identity a case can carry."""
    payload: dict[str, object] = {**data_digests(), "parameters": protocol_parameters(), **extra}
    if mode == "full":
        payload, prefix = {**payload, "full_mode": full_schedule_parameters()}, f"{prefix}-full"
    elif mode != "fast":
        raise ValueError(f"no {what} identity for mode {mode!r}")
    return f"{prefix}-v1:" + sha256_bytes(canonical_json(payload))[:32]
