"""Stable digests: file and array hashes, and the protocol identity (P12).

The protocol identity is a sha256 over a canonical JSON of everything that defines
what a result means: the catalog bytes, the inventory bytes and the P4-P9 parameters.
It must not move when code is refactored; a golden test pins it.
"""

from __future__ import annotations

import hashlib
import json
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np


def sha256_bytes(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def array_sha256(array: np.ndarray) -> str:
    """Hash of an array's C-order bytes: independent of how it was stored."""
    return sha256_bytes(np.ascontiguousarray(array).tobytes())


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()


@cache
def data_digests() -> dict[str, str]:
    """sha256 of the packaged catalog and inventory files."""
    from pytest_libero.catalog import load_catalog
    from pytest_libero.inventory import load_inventory_bytes

    return {
        "catalog_sha256": load_catalog().digest,
        "inventory_sha256": sha256_bytes(load_inventory_bytes()),
    }


@cache
def protocol_identity() -> str:
    """The digest that names this protocol; it changes only when the protocol does."""
    from pytest_libero.protocol import protocol_parameters

    payload = {**data_digests(), "parameters": protocol_parameters()}
    return "libero-protocol-v1:" + sha256_bytes(canonical_json(payload))[:32]
