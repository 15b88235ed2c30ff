"""The frozen LIBERO catalog (P1): 130 suite-task entries in native order, and beside
them, never mixed in, the OOD entries of the LIBERO-PRO suites (docs/robustness.md).

Protocol data shipped inside the package, with per-suite reference horizons and where
they come from; loaded once and shared. An entry holds at most one variant: an OOD
source (a LIBERO-PRO entry and its native twin) or a generated perturbation of a
native case. Its dict form is the record's ``entry`` (:class:`EntryRecord`), written and
read by :meth:`Entry.as_dict` and :meth:`Entry.from_dict` alone."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import cache
from typing import Any, NotRequired, TypedDict

from pytest_libero.catalog.case_id import CaseId, VariantTag
from pytest_libero.data import CATALOG_FILE, OOD_CATALOG_FILE
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.hashing import sha256_bytes
from pytest_libero.protocol.shipped import json_table, need, reading, shipped_bytes, shipped_json

NATIVE_FAMILY = "libero"
OOD_FAMILY = "libero_pro"
OOD_KINDS = ("object", "position", "semantic", "environment")
"""The perturbation kinds of the benchmark design we follow (docs/robustness.md)."""
PARAPHRASE = "paraphrase"
"""The kind of a paraphrase companion: a ``_lan`` entry's instruction in its twin's own
scene and init state (docs/robustness.md), paired with the twin like an OOD entry."""
PARAPHRASE_VARIANT = "lan"
"""The LIBERO-PRO suite variant whose entries get a paraphrase companion."""
REWRITTEN = "rewrite"
"""An entry's ``language_source`` when its kind sends words of its own (a frozen table's)."""


@dataclass(frozen=True)
class OodSource:
    """An OOD entry's variant: files on disk (a LIBERO-PRO suite) that perturb a native task."""

    kind: str
    """object, position, semantic or environment; ``paraphrase`` for a companion."""
    level: int
    """1, or the step (1-5) of a position sweep."""
    twin: CaseId
    """The native task this entry perturbs (no state: the entry's own is used)."""

    @property
    def tag(self) -> VariantTag | None:
        """None: an OOD entry has its own suite, so its case id needs no tag; a paraphrase
        companion runs in its twin's suite, tagged ``~paraphrase``."""
        return VariantTag(PARAPHRASE) if self.kind == PARAPHRASE else None


@dataclass(frozen=True)
class GeneratedPerturbation:
    """A native case under a perturbation drawn at run time (perturb/), paired with itself
    unperturbed."""

    kind: str
    level: int

    @property
    def tag(self) -> VariantTag:
        return VariantTag(self.kind, self.level)


Variant = OodSource | GeneratedPerturbation
"""What makes an entry other than a native case; an entry holds one or none."""


class EntryRecord(TypedDict):
    """The catalog entry in a case record (P1): which task this case ran, and its variant.

    Record schema 2; a schema-1 record (docs/records.md) reads the same through
    :meth:`Entry.from_dict`."""

    suite: str
    index: int
    name: str
    language: str
    bddl_file: str
    init_states_file: str
    init_state: NotRequired[int]
    """Full mode: the released init state this case started from."""
    family: NotRequired[str]
    """``libero`` or ``libero_pro`` (an OOD entry); absent in older records: native."""
    language_source: NotRequired[str]
    """``task_name``, ``bddl`` or ``twin``: where ``language`` came from."""
    kind: NotRequired[str]
    """OOD only: object, position, semantic or environment. (Schema 1 repeated a generated
    perturbation's kind here.)"""
    level: NotRequired[int]
    """OOD only: the perturbation's level (1; 1-5 on a position sweep)."""
    perturbation: NotRequired[dict[str, Any]]
    """Generated perturbation only: its ``kind`` and ``level``."""
    twin: NotRequired[str]
    """OOD or generated perturbation: the case id of the native case this one perturbs."""
    identity: NotRequired[str]
    """OOD or generated perturbation: the case's identity (``libero-ood-v1:...``,
    ``libero-perturb-v1:...``), the run plan's for its variant."""


@dataclass(frozen=True)
class Entry:
    """One suite-task entry of the catalog, addressed by (suite, index), as one case runs
    it: at an init state in full mode, and with at most one variant."""

    suite: str
    index: int
    name: str
    language: str
    bddl_file: str
    init_states_file: str
    state: int | None = None
    """The released init state a full-mode case starts from; None in fast mode (P3)."""
    variant: Variant | None = None
    """An OOD source, a generated perturbation, or None: a native case."""
    language_source: str = "task_name"
    """Where ``language`` comes from: ``task_name`` (native, as published loops send it),
    ``bddl`` (a semantic OOD entry: its BDDL's instruction is the perturbation),
    ``twin`` (another kind: the twin's instruction, so the pair differs in the scene only)
    or ``rewrite`` (a generated kind's own words, :meth:`reworded`)."""

    @property
    def family(self) -> str:
        """``libero`` (the 130 native entries and their generated perturbations) or
        ``libero_pro`` (an OOD entry)."""
        return OOD_FAMILY if isinstance(self.variant, OodSource) else NATIVE_FAMILY

    @property
    def is_ood(self) -> bool:
        return isinstance(self.variant, OodSource)

    @property
    def ood(self) -> OodSource | None:
        return self.variant if isinstance(self.variant, OodSource) else None

    @property
    def perturbation(self) -> GeneratedPerturbation | None:
        return self.variant if isinstance(self.variant, GeneratedPerturbation) else None

    @property
    def id(self) -> CaseId:
        """The case id (catalog/case_id.py): task, ``-s<N>`` in full mode, the variant's tag."""
        return CaseId(self.suite, self.index, self.state,
                      None if self.variant is None else self.variant.tag)

    @property
    def case_id(self) -> str:
        """The case id as text: the pytest id, ``libero_10-03-s17~camera2``."""
        return str(self.id)

    @property
    def task_id(self) -> str:
        """Suite and two-digit native index: the task, whatever its init state."""
        return str(self.id.task)

    @property
    def twin(self) -> CaseId | None:
        """The case this one is paired with, at this case's state in full mode: an OOD
        entry's native task, a perturbed case unperturbed; None for a native case."""
        if isinstance(self.variant, OodSource):
            return self.variant.twin.at_state(self.state)
        if isinstance(self.variant, GeneratedPerturbation):
            return self.id.base
        return None

    def at_state(self, state: int) -> Entry:
        """This task started from released init state ``state`` (a full-mode case)."""
        return replace(self, state=state)

    def perturbed(self, kind: str, level: int) -> Entry:
        """This native case under a generated perturbation, paired with itself unperturbed;
        its words stay the twin's (perturb/registry.py gives a kind its own)."""
        if self.is_ood:
            raise SetupError(
                f"--libero-perturb applies to native entries, not {self.case_id}: a LIBERO-PRO "
                "entry is a perturbation already; drop one of --libero-perturb and the OOD "
                "selection"
            )
        return replace(self, variant=GeneratedPerturbation(kind, level))

    def reworded(self, language: str) -> Entry:
        """This case sending ``language``, its kind's own words, instead of its twin's."""
        return replace(self, language=language, language_source=REWRITTEN)

    def as_dict(self, identity: str | None = None) -> EntryRecord:
        """The record's ``entry``; ``identity`` is the variant's (the run plan knows it)."""
        data: EntryRecord = {
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
        if isinstance(self.variant, OodSource):
            data["kind"], data["level"] = self.variant.kind, self.variant.level
        elif isinstance(self.variant, GeneratedPerturbation):
            data["perturbation"] = {"kind": self.variant.kind, "level": self.variant.level}
        if self.twin is not None:
            data["twin"] = str(self.twin)
        if identity is not None:
            data["identity"] = identity
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Entry:
        """The entry a record's ``entry`` describes, of either record schema (records
        from before OOD entries are native)."""
        state = data.get("init_state")
        return cls(
            suite=str(data["suite"]), index=int(data["index"]), name=str(data["name"]),
            language=str(data["language"]), bddl_file=str(data["bddl_file"]),
            init_states_file=str(data["init_states_file"]),
            state=None if state is None else int(state), variant=variant_of(data),
            language_source=str(data.get("language_source", "task_name")),
        )


def variant_of(data: Mapping[str, Any]) -> Variant | None:
    """The variant a record's ``entry`` holds, of either record schema: what
    :meth:`Entry.from_dict` reads, for readers that need no more of the entry."""
    perturbation = data.get("perturbation")
    if isinstance(perturbation, Mapping):  # schema 1 repeated kind and level at the top
        return GeneratedPerturbation(str(perturbation["kind"]), int(perturbation["level"]))
    if data.get("family", NATIVE_FAMILY) == OOD_FAMILY:
        return OodSource(str(data["kind"]), int(data["level"]), CaseId.parse(str(data["twin"])).task)
    return None


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
        """The native entry an OOD or perturbed entry is paired with, at the same init state."""
        twin = entry.twin
        if twin is None:
            raise ValueError(f"{entry.case_id} is a native entry: it has no twin")
        native = next(e for e in self.entries if e.suite == twin.suite and e.index == twin.index)
        return native if entry.state is None else native.at_state(entry.state)

    def paraphrase_of(self, entry: Entry) -> Entry:
        """The paraphrase companion of a ``_lan`` entry: its twin, at its state, sending
        its BDDL's paraphrase; scene and init state are the twin's."""
        source = entry.ood
        suite = self.ood_suites.get(entry.suite)
        if source is None or suite is None or suite.variant != PARAPHRASE_VARIANT:
            raise ValueError(f"{entry.case_id} is not a LIBERO-PRO paraphrase (_lan) entry")
        return replace(self.twin_of(entry), variant=OodSource(PARAPHRASE, 1, source.twin),
                       language=entry.language, language_source="bddl")

    def paraphrase_source(self, companion: Entry) -> Entry:
        """The ``_lan`` entry a paraphrase companion takes its instruction from."""
        twin = companion.twin
        found = [e for e in self.ood_entries if twin is not None and e.ood is not None
                 and e.ood.twin == twin.task
                 and self.ood_suites[e.suite].variant == PARAPHRASE_VARIANT]
        if len(found) != 1:
            raise ValueError(f"{companion.case_id}: no single LIBERO-PRO paraphrase of {twin}")
        return found[0]

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
    """Load the packaged catalog; its sha256 is part of the protocol identity. A damaged
    catalog or OOD catalog is a usage error naming the file (``protocol.shipped``)."""
    raw = shipped_bytes(CATALOG_FILE)
    data = json_table(CATALOG_FILE, raw)
    with reading(CATALOG_FILE):
        entries = tuple(_native_entry(e, f"entries[{i}].")
                        for i, e in enumerate(need(data, "entries", list)))
        suites = need(data, "suites", dict)
        for name, info in suites.items():
            need(info, "horizon", int, f"suites.{name}.")
            need(info, "horizon_source", str, f"suites.{name}.")
    ood = shipped_json(OOD_CATALOG_FILE)
    with reading(OOD_CATALOG_FILE):
        ood_suites = {name: _ood_suite(name, s) for name, s in need(ood, "suites", dict).items()}
        ood_entries = tuple(_ood_entry(e, ood_suites, f"entries[{i}].")
                            for i, e in enumerate(need(ood, "entries", list)))
        not_ready = {str(k): str(v) for k, v in need(ood, "not_ready", dict).items()}
    return Catalog(entries=entries, suites=suites, digest=sha256_bytes(raw),
                   ood_entries=ood_entries, ood_suites=ood_suites, not_ready=not_ready)


_ENTRY_TEXTS = ("suite", "name", "language", "bddl_file", "init_states_file")


def _native_entry(e: Any, where: str) -> Entry:
    texts = {key: need(e, key, str, where) for key in _ENTRY_TEXTS}
    return Entry(index=need(e, "index", int, where), **texts)


def _ood_suite(name: str, s: Any) -> OodSuite:
    where = f"suites.{name}."
    return OodSuite(name=name, **{key: need(s, key, str, where) for key in (
        "base", "kind", "variant", "changes", "horizon_source")},
        level=need(s, "level", int, where), horizon=need(s, "horizon", int, where))


def _ood_entry(e: Any, suites: Mapping[str, OodSuite], where: str) -> Entry:
    suite = suites[need(e, "suite", str, where)]
    twin = need(e, "twin", dict, where)
    return replace(_native_entry(e, where), language_source=need(e, "language_source", str, where),
                   variant=OodSource(suite.kind, suite.level, CaseId(
                       need(twin, "suite", str, f"{where}twin."),
                       need(twin, "index", int, f"{where}twin."))))
