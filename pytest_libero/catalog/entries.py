"""The frozen LIBERO catalog (P1): 130 suite-task entries in native order, and beside
them, never mixed in, the OOD entries of the LIBERO-PRO suites (docs/robustness.md).

Protocol data shipped inside the package, with per-suite reference horizons and where
they come from; loaded once and shared. An OOD entry knows its kind, level and native
twin; its suite borrows the base suite's horizon."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any

from pytest_libero.data import CATALOG_FILE, OOD_CATALOG_FILE, data_path
from pytest_libero.perturb.levels import perturb_identity
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.hashing import sha256_bytes
from pytest_libero.protocol.identity import ood_identity

NATIVE_FAMILY = "libero"
OOD_FAMILY = "libero_pro"
OOD_KINDS = ("object", "position", "semantic", "environment")
"""The perturbation kinds of the benchmark design we follow (docs/robustness.md)."""


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
    family: str = NATIVE_FAMILY
    """``libero`` (the 130 native entries) or ``libero_pro`` (an OOD entry)."""
    kind: str | None = None
    """OOD only: object, position, semantic or environment."""
    level: int | None = None
    """OOD only: 1, or the step (1-5) of a position sweep."""
    twin: tuple[str, int] | None = None
    """OOD only: the native (suite, index) this entry perturbs."""
    perturbation: tuple[str, int] | None = None
    """A generated perturbation (kind, level) of this native entry (perturb/); its twin
    is the same entry unperturbed."""
    language_source: str = "task_name"
    """Where ``language`` comes from: ``task_name`` (native, as published loops send it),
    ``bddl`` (a semantic OOD entry: its BDDL's instruction is the perturbation) or
    ``twin`` (another kind: the twin's instruction, so the pair differs in the scene only)."""

    @property
    def is_ood(self) -> bool:
        return self.family == OOD_FAMILY

    @property
    def twin_case_id(self) -> str | None:
        """The twin's case id, at this case's state in full mode."""
        if self.twin is None:
            return None
        task = f"{self.twin[0]}-{self.twin[1]:02d}"
        return task if self.state is None else f"{task}-s{self.state}"

    @property
    def task_id(self) -> str:
        """Suite and two-digit native index: the task, whatever its init state."""
        return f"{self.suite}-{self.index:02d}"

    @property
    def case_id(self) -> str:
        """Stable, readable pytest id: the task, ``-s<N>`` for a full-mode state, and
        ``~<kind><level>`` for a generated perturbation (``libero_10-03~camera2``)."""
        case = self.task_id if self.state is None else f"{self.task_id}-s{self.state}"
        if self.perturbation is not None:
            case += f"~{self.perturbation[0]}{self.perturbation[1]}"
        return case

    def at_state(self, state: int) -> Entry:
        """This task started from released init state ``state`` (a full-mode case)."""
        return replace(self, state=state)

    def perturbed(self, kind: str, level: int) -> Entry:
        """This native case under a generated perturbation, paired with itself unperturbed."""
        if self.is_ood:
            raise SetupError(
                f"--libero-perturb applies to native entries, not {self.case_id}: a LIBERO-PRO "
                "entry is a perturbation already; drop one of --libero-perturb and the OOD "
                "selection"
            )
        return replace(self, perturbation=(kind, level), twin=(self.suite, self.index))

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
        data["family"] = self.family
        data["language_source"] = self.language_source
        mode = "fast" if self.state is None else "full"
        if self.is_ood:
            data.update(kind=self.kind, level=self.level, twin=self.twin_case_id,
                        identity=ood_identity(mode))
        if self.perturbation is not None:
            kind, level = self.perturbation
            data.update(perturbation={"kind": kind, "level": level}, kind=kind, level=level,
                        twin=self.twin_case_id, identity=perturb_identity(mode))
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Entry:
        """The entry a record's ``entry`` describes (records before OOD are native)."""
        twin = data.get("twin")
        perturbation = data.get("perturbation")
        return cls(
            suite=str(data["suite"]), index=int(data["index"]), name=str(data["name"]),
            language=str(data["language"]), bddl_file=str(data["bddl_file"]),
            init_states_file=str(data["init_states_file"]), state=data.get("init_state"),
            family=str(data.get("family", NATIVE_FAMILY)),
            # A perturbed record's kind and level are its perturbation's.
            kind=None if perturbation else data.get("kind"),
            level=None if perturbation else data.get("level"),
            twin=_twin_key(str(twin)) if twin else None,
            perturbation=((str(perturbation["kind"]), int(perturbation["level"]))
                          if isinstance(perturbation, Mapping) else None),
            language_source=str(data.get("language_source", "task_name")),
        )


def _twin_key(case_id: str) -> tuple[str, int]:
    """``libero_goal-00``, ``libero_goal-00-s7`` or ``..~camera2`` -> ("libero_goal", 0)."""
    suite, index = case_id.split("~")[0].split("-")[:2]
    return suite, int(index)


@dataclass(frozen=True)
class OodSuite:
    """A ready LIBERO-PRO suite: what it perturbs and how."""

    name: str
    base: str
    kind: str
    level: int
    variant: str
    changes: str
    horizon: int
    horizon_source: str


@dataclass(frozen=True)
class Catalog:
    """The whole frozen catalog: native entries in native order plus horizon references,
    and the OOD entries with their suites and the suites that are not ready."""

    entries: tuple[Entry, ...]
    suites: dict[str, dict[str, Any]]
    digest: str
    ood_entries: tuple[Entry, ...] = ()
    ood_suites: Mapping[str, OodSuite] = field(default_factory=dict)
    not_ready: Mapping[str, str] = field(default_factory=dict)
    """LIBERO-PRO suites left out, each with why."""

    def suite_entries(self, suite: str) -> tuple[Entry, ...]:
        pool = self.ood_entries if suite in self.ood_suites else self.entries
        return tuple(e for e in pool if e.suite == suite)

    def horizon(self, suite: str) -> tuple[int, str]:
        """The suite's reference horizon and the evaluator it comes from (P7); an OOD
        suite has its base suite's."""
        if suite in self.ood_suites:
            ood = self.ood_suites[suite]
            return ood.horizon, ood.horizon_source
        info = self.suites[suite]
        return int(info["horizon"]), str(info["horizon_source"])

    def twin_of(self, entry: Entry) -> Entry:
        """The native entry an OOD entry perturbs, at the same init state."""
        if entry.twin is None:
            raise ValueError(f"{entry.case_id} is a native entry: it has no twin")
        suite, index = entry.twin
        native = next(e for e in self.entries if e.suite == suite and e.index == index)
        return native if entry.state is None else native.at_state(entry.state)

    def refuse_not_ready(self, suite: str) -> None:
        """A LIBERO-PRO suite that is registered but cannot run: refused by name."""
        if suite in self.not_ready:
            raise SetupError(
                f"--libero-suite={suite!r} is a LIBERO-PRO suite that is not ready here: "
                f"{self.not_ready[suite]}. Ready OOD suites: --libero-scope=ood lists them "
                "(docs/robustness.md)"
            )


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
    ood = json.loads(data_path(OOD_CATALOG_FILE).read_bytes())
    ood_suites = {
        name: OodSuite(name=name, base=s["base"], kind=s["kind"], level=int(s["level"]),
                       variant=s["variant"], changes=s["changes"], horizon=int(s["horizon"]),
                       horizon_source=s["horizon_source"])
        for name, s in ood["suites"].items()
    }
    ood_entries = tuple(
        Entry(
            suite=e["suite"], index=int(e["index"]), name=e["name"], language=e["language"],
            bddl_file=e["bddl_file"], init_states_file=e["init_states_file"],
            family=OOD_FAMILY, kind=ood_suites[e["suite"]].kind,
            level=ood_suites[e["suite"]].level,
            twin=(e["twin"]["suite"], int(e["twin"]["index"])),
            language_source=e["language_source"],
        )
        for e in ood["entries"]
    )
    return Catalog(
        entries=entries,
        suites=data["suites"],
        digest=sha256_bytes(raw),
        ood_entries=ood_entries,
        ood_suites=ood_suites,
        not_ready=dict(ood["not_ready"]),
    )
