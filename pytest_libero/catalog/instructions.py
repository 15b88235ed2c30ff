"""The frozen table of rewritten instructions (the ``semantic`` perturbation's words).

The rewrites are not drawn at run time: ``catalog/build_instructions.py`` writes every
native entry's four instructions (levels 1-4) by documented rules into
``data/libero_instructions.json``, committed and reviewed. A semantic case is its twin
with its own line of the table as the instruction; the table's sha256 is part of the
perturbed identity (perturb/levels.py), so a changed word changes what a result means.
The scene and init state stay the twin's (docs/perturbations.md).
"""

from __future__ import annotations

import json
from functools import cache
from typing import Any, Final

from pytest_libero.catalog.case_id import CaseId
from pytest_libero.data import INSTRUCTIONS_FILE, data_path
from pytest_libero.protocol.hashing import sha256_bytes

SCHEMA: Final = "pytest-libero/instructions/1"
LANGUAGE_SOURCE: Final = "rewrite"
"""An entry's ``language_source`` when its instruction comes from this table."""


@cache
def _raw() -> bytes:
    return data_path(INSTRUCTIONS_FILE).read_bytes()


@cache
def instruction_table() -> dict[str, Any]:
    """The frozen table: ``entries[task id][level]`` and the task's own ``task`` text."""
    table: dict[str, Any] = json.loads(_raw())
    if table.get("schema") != SCHEMA:
        raise ValueError(f"{INSTRUCTIONS_FILE} has schema {table.get('schema')!r}, not {SCHEMA!r}: "
                         "rebuild it with python catalog/build_instructions.py")
    return table


def table_sha256() -> str:
    """What the perturbed identity hashes: the table file's bytes."""
    return sha256_bytes(_raw())


def rewritten(case: str, level: int) -> str:
    """The instruction of the native case ``case`` (any state, any variant) at ``level``."""
    task = str(CaseId.parse(case).task)
    row = instruction_table()["entries"].get(task)
    if row is None:
        raise ValueError(f"{task} has no rewritten instructions in {INSTRUCTIONS_FILE}: "
                         "the semantic kind covers the native suites only")
    return str(row[str(level)])
