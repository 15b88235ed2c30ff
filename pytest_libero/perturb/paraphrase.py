"""LIBERO-PRO's paraphrases on the twin's scene: a companion case changes only the words.

A paraphrase companion (docs/robustness.md) is not a generated kind: its words are a
``_lan`` entry's BDDL instruction, set at selection. Nothing is applied to the
simulator; the record keeps the paraphrase, the entry it comes from and what was sent.
"""

from __future__ import annotations

from typing import Any

from pytest_libero.catalog.entries import Entry, load_catalog
from pytest_libero.perturb.kind import Applied, Stage


def paraphrase_record(entry: Entry) -> dict[str, Any]:
    """A paraphrase companion's record of its instruction: the paraphrase its LIBERO-PRO
    ``_lan`` entry's BDDL holds, that entry's case id, and the instruction sent."""
    source = load_catalog().paraphrase_source(entry)
    return {"kind": "paraphrase", "level": 1,
            "parameters": {"instruction": source.language, "source": source.case_id},
            "applied": {"instruction_sent": entry.language}}


class ParaphraseApplied(Applied):
    def __init__(self, stage: Stage) -> None:
        super().__init__(stage)
        self.record = paraphrase_record(stage.entry)
