"""The ``semantic`` kind and LIBERO-PRO's paraphrases on the twin's scene: only the
instruction changes, so what the record keeps is the instruction.

Nothing is applied to the simulator. ``parameters`` is what a draw of the kind gives
(the table's line and the table's hash); the adapter adds what it sent, so ``verify``,
which draws again, finds an edited instruction in either place.
"""

from __future__ import annotations

from typing import Any

from pytest_libero.catalog.entries import Entry, load_catalog
from pytest_libero.catalog.instructions import rewritten, table_sha256


def parameters(twin: str, level: int) -> dict[str, Any]:
    """A semantic case's drawn parameters: its instruction and the table's sha256."""
    return {"instruction": rewritten(twin, level), "table_sha256": table_sha256()}


def paraphrase_record(entry: Entry) -> dict[str, Any]:
    """A paraphrase companion's record of its instruction: the paraphrase its LIBERO-PRO
    ``_lan`` entry's BDDL holds, that entry's case id, and the instruction sent."""
    source = load_catalog().paraphrase_source(entry)
    return {"kind": "paraphrase", "level": 1,
            "parameters": {"instruction": source.language, "source": source.case_id},
            "applied": {"instruction_sent": entry.language}}
