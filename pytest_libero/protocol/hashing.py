"""Stable digests of bytes, files and arrays; the one place hashes are computed.

An array's digest is over its C-order bytes, so it does not depend on how the array
was stored or sent.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, BinaryIO

import numpy as np


def sha256_bytes(data: bytes | memoryview) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 16), b""):
            digest.update(block)
    return digest.hexdigest()


def sha256_stream(stream: BinaryIO, limit: int) -> tuple[str, int]:
    """The sha256 of a stream's first ``limit`` + 1 bytes at most, and how many it held:
    more than ``limit`` says the stream is longer, without reading the rest of it."""
    digest = hashlib.sha256()
    read = 0
    while read <= limit:
        block = stream.read(min(1 << 16, limit + 1 - read))
        if not block:
            break
        digest.update(block)
        read += len(block)
    return digest.hexdigest(), read


def array_sha256(array: np.ndarray) -> str:
    """Hash of an array's C-order bytes: independent of how it was stored."""
    return sha256_bytes(np.ascontiguousarray(array).tobytes())


def canonical_json(value: Any) -> bytes:
    return json.dumps(value, sort_keys=True, separators=(",", ":")).encode()
