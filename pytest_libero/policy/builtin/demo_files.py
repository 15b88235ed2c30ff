"""The demo's shipped files, checked against the sha256 this version pins, before any case.

A provenance file records its recording's hash, so a recording edited with its
provenance updated to match passed that check, and the demo played actions nobody
recorded; a provenance file deleted was a task the demo silently no longer covered
(blamed on the policy at that case's turn), one without ``actions_sha256`` a KeyError,
and a recording replaced by a link to ``/dev/zero`` was read without end. Like the
instruction table's (``perturb/kinds/semantic.py``), the hashes live in the code: every
file is read bounded, as a regular file only, and must be the very file this version
shipped, or the installation is damaged, one line (``protocol/shipped.py``) from
``session.check_shipped_data`` before any case. Re-recording the demos
(``tests/tools/make_demos.py``) pins them here anew.
"""

from __future__ import annotations

from collections.abc import Mapping
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Final

from pytest_libero.data import DEMOS_FOLDER, data_path
from pytest_libero.files import Refused, read_capped
from pytest_libero.protocol.hashing import sha256_bytes
from pytest_libero.protocol.shipped import damaged

SHIPPED_SHA256: Final[Mapping[str, str]] = {
    "libero_10-00.json": "eedced48c2b42d95e73548b4be6e28343ab6be2e460521eedc49b5feff20c9d1",
    "libero_10-00.npy": "e045648bc4126ab2dd0b18a617ca58ac69547e7b8aa4e7a8862d3550a2a62576",
    "libero_90-46.json": "766ad413e36c9f1492493672a6a09545e9514e661f0aeb03e58c1c007cc60181",
    "libero_90-46.npy": "27e43462ec5eef29d5da9843a15930288c6db10e568f0ec5970b5ae860940174",
    "libero_goal-06.json": "75b51d2b756e8a9d72d4f70fc13fa70f90ecc75d725d54fbc5124f526ae86eb0",
    "libero_goal-06.npy": "338d6217cfd19da8b677ba570bb8f4e0ed3371ff379511d93cbf432999b37f27",
    "libero_object-00.json": "876772af22940e2f59a6c3a18b3c6c18881858ff1e14d7ef560b89fcace59fc1",
    "libero_object-00.npy": "109152a79e6de85a2834d12e3ea1bc26c127753620c9c3e0ce03bf6ebcd22e08",
    "libero_spatial-00.json": "0b2a788cb40e323aba7c936114582d594d3c8840219686d4dcda99f408b07310",
    "libero_spatial-00.npy": "44f1a311591313a06026b0adbe26d936d4d0d7ae2f10fbcc5ed0c9674036c821",
}
"""Each shipped demo file (under ``data/demos``) and the sha256 of its bytes."""
MAX_BYTES: Final = 1 << 20
"""The most a demo file may hold (the largest shipped one holds 11 kB)."""


def shipped_name(name: str) -> str:
    """How the damaged line names a demo file: its path under the package's data."""
    return f"{DEMOS_FOLDER}/{name}"


def demo_bytes(name: str) -> bytes:
    """The shipped demo file ``name``'s bytes, once they are the ones this version
    shipped (DamagedInstall otherwise: missing, not a regular file, too large, edited)."""
    return pinned_bytes(DEMOS_FOLDER, name, SHIPPED_SHA256[name], MAX_BYTES)


def pinned_bytes(folder: str, name: str, pinned: str, limit: int) -> bytes:
    """The shipped file ``folder/name``'s bytes, read bounded, once their sha256 is
    ``pinned`` (DamagedInstall otherwise: missing, not a regular file, too large, edited)."""
    where = f"{folder}/{name}"
    try:
        data = bounded(data_path(folder).joinpath(name), limit)
    except OSError as exc:
        raise damaged(where, exc.strerror or str(exc)) from None
    except ValueError as exc:
        raise damaged(where, str(exc)) from None
    found = sha256_bytes(data)
    if found != pinned:
        raise damaged(where, f"sha256 {found[:12]}..., not the shipped {pinned[:12]}...: it "
                             "was edited or replaced")
    return data


def check_demos() -> None:
    """Read every shipped demo file through :func:`demo_bytes`: a damaged one is one line
    before any case."""
    for name in SHIPPED_SHA256:
        demo_bytes(name)


def bounded(found: Traversable, limit: int) -> bytes:
    """A file's bytes, at most ``limit`` (ValueError beyond): on a file system only a
    regular file is opened (a link to ``/dev/zero`` is refused unread); from a zip its
    entry is read to ``limit`` and no further."""
    if isinstance(found, Path):
        try:
            return read_capped(found, limit)
        except Refused as exc:
            raise ValueError(str(exc).removeprefix(f"{found} is ").removeprefix(f"{found} ")) from None
    with found.open("rb") as stream:
        data = stream.read(limit + 1)
    if len(data) > limit:
        raise ValueError(f"holds more than {limit} bytes")
    return data
