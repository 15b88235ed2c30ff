"""The ``semantic`` kind: the same goal in other words, the scene untouched.

The words are not drawn at run time: ``release/build_instructions.py`` writes every
native entry's four instructions (levels 1-4) by documented rules into
``data/libero_instructions.json``, committed and reviewed. A semantic case is its twin
with its own line of that table as the instruction (chosen at selection); the table's
sha256 is part of the perturbed identity, so a changed word changes what a result
means. Nothing is applied to the simulator: the record keeps the table's line and what
was sent, so ``verify``, which draws again, finds an edited instruction in either place.
The levels build on each other (docs/perturbations.md).
"""

from __future__ import annotations

from functools import cache
from typing import Any, ClassVar, Final

from pytest_libero.catalog.case_id import CaseId
from pytest_libero.catalog.entries import load_catalog
from pytest_libero.data import INSTRUCTIONS_FILE
from pytest_libero.perturb.kind import Context, Kind, KindApplied, Perturbation, Stage, seed_of
from pytest_libero.protocol.hashing import sha256_bytes
from pytest_libero.protocol.shipped import DamagedInstall, json_table, need, reading, shipped_bytes

SCHEMA: Final = "pytest-libero/instructions/1"
LEVEL_KEYS: Final = ("1", "2", "3", "4")
"""A row's levels, each a line of the table."""

SHIPPED_SHA256: Final = "1adc0d54e978635addbd510b7977d0d64089d72492db69fe487d7227735027d2"
"""The sha256 of the table this version ships. Its words reach the policy, so a table
edited after installation is refused, never obeyed; a table rebuilt on purpose
(release/build_instructions.py) is pinned here anew."""


@cache
def _raw() -> bytes:
    return shipped_bytes(INSTRUCTIONS_FILE)


@cache
def instruction_table() -> dict[str, Any]:
    """The frozen table: ``entries[task id][level]`` and the task's own ``task`` text, a
    line of every level for every native task; a damaged or incomplete one is a usage
    error naming the file (``protocol.shipped``)."""
    table = json_table(INSTRUCTIONS_FILE, _raw(), SCHEMA)
    with reading(INSTRUCTIONS_FILE):
        entries = need(table, "entries", dict)
        for entry in load_catalog().entries:
            row = need(entries, entry.task_id, dict, "entries.")
            for key in ("task", *LEVEL_KEYS):
                need(row, key, str, f"entries.{entry.task_id}.")
    found = sha256_bytes(_raw())
    if found != SHIPPED_SHA256:  # well formed, but edited: its words would reach the policy
        raise DamagedInstall(f"{INSTRUCTIONS_FILE} in the installed pytest-libero is not the "
                             f"table this version shipped (sha256 {found[:12]}..., shipped "
                             f"{SHIPPED_SHA256[:12]}...): its words would be sent to the "
                             "policy; reinstall pytest-libero")
    return table


def table_sha256() -> str:
    """What the perturbed identity hashes: the table file's bytes, once they are the
    shipped table's."""
    instruction_table()
    return sha256_bytes(_raw())


def rewritten(case: str, level: int) -> str:
    """The instruction of the native case ``case`` (any state, any variant) at ``level``."""
    task = str(CaseId.parse(case).task)
    row = instruction_table()["entries"].get(task)
    if row is None:
        raise ValueError(f"{task} has no rewritten instructions in {INSTRUCTIONS_FILE}: "
                         "the semantic kind covers the native suites only")
    return str(row[str(level)])


class SemanticApplied(KindApplied):
    def __init__(self, kind: Kind, level: int, stage: Stage) -> None:
        super().__init__(kind, level, stage)
        self.record = {**self.draw().as_dict(),
                       "applied": {"instruction_sent": stage.entry.language}}


class Semantic(Kind):
    name = "semantic"
    levels: ClassVar[dict[int, dict[str, float]]] = {
        # 1 one synonym; 2 synonyms throughout and another sentence frame; 3 plus a clause
        # about an object the task leaves alone; 4 plus task objects named by description.
        1: {"synonyms_all": 0.0, "frame": 0.0, "clause": 0.0, "describe": 0.0},
        2: {"synonyms_all": 1.0, "frame": 1.0, "clause": 0.0, "describe": 0.0},
        3: {"synonyms_all": 1.0, "frame": 1.0, "clause": 1.0, "describe": 0.0},
        4: {"synonyms_all": 1.0, "frame": 1.0, "clause": 1.0, "describe": 1.0},
    }
    applied = SemanticApplied

    def draw(self, level: int, case: str, attempt: int = 0,
             context: Context | None = None) -> Perturbation:
        """Nothing is drawn: the table's line for the case and level, and the table's sha256."""
        parameters = {"instruction": rewritten(case, level), "table_sha256": table_sha256()}
        return Perturbation(self.name, level, parameters, seed_of(case, self.name, level, attempt),
                            attempt)

    def identity_terms(self) -> dict[str, Any]:
        return {"instructions_sha256": table_sha256()}

    def instruction(self, twin: str, level: int) -> str | None:
        return rewritten(twin, level)
