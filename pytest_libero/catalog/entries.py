"""The frozen LIBERO catalog (P1): 130 suite-task entries in native order.

Protocol data shipped inside the package, with per-suite reference horizons and where
they come from; loaded once and shared."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from pytest_libero.data import CATALOG_FILE, data_path
from pytest_libero.protocol.hashing import sha256_bytes


@dataclass(frozen=True)
class Entry:
    """One suite-task entry of the catalog, addressed by (suite, index)."""

    suite: str
    index: int
    name: str
    language: str
    bddl_file: str
    init_states_file: str
    state: int | None = None
    """The released init state a full-mode case starts from; None in fast mode (P3)."""

    @property
    def task_id(self) -> str:
        """Suite and two-digit native index: the task, whatever its init state."""
        return f"{self.suite}-{self.index:02d}"

    @property
    def case_id(self) -> str:
        """Stable, readable pytest id: the task, and ``-s<N>`` for a full-mode state."""
        return self.task_id if self.state is None else f"{self.task_id}-s{self.state}"

    def at_state(self, state: int) -> Entry:
        """This task started from released init state ``state`` (a full-mode case)."""
        return replace(self, state=state)

    def as_dict(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "suite": self.suite,
            "index": self.index,
            "name": self.name,
            "language": self.language,
            "bddl_file": self.bddl_file,
            "init_states_file": self.init_states_file,
        }
        if self.state is not None:
            data["init_state"] = self.state
        return data


@dataclass(frozen=True)
class Catalog:
    """The whole frozen catalog: entries in native order plus horizon references."""

    entries: tuple[Entry, ...]
    suites: dict[str, dict[str, Any]]
    digest: str

    def suite_entries(self, suite: str) -> tuple[Entry, ...]:
        return tuple(e for e in self.entries if e.suite == suite)

    def horizon(self, suite: str) -> tuple[int, str]:
        """The suite's reference horizon and the evaluator it comes from (P7)."""
        info = self.suites[suite]
        return int(info["horizon"]), str(info["horizon_source"])


@cache
def load_catalog() -> Catalog:
    """Load the packaged catalog; its sha256 is part of the protocol identity."""
    raw = data_path(CATALOG_FILE).read_bytes()
    data = json.loads(raw)
    entries = tuple(
        Entry(
            suite=e["suite"],
            index=int(e["index"]),
            name=e["name"],
            language=e["language"],
            bddl_file=e["bddl_file"],
            init_states_file=e["init_states_file"],
        )
        for e in data["entries"]
    )
    return Catalog(
        entries=entries,
        suites=data["suites"],
        digest=sha256_bytes(raw),
    )
