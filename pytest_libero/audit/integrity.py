"""File integrity of one case folder: every evidence file as its record hashed it.

Cheap and done first. It catches a file edited without re-hashing; a file edited and
re-hashed consistently passes here and is caught by re-execution (``replay``).
"""

from __future__ import annotations

from pathlib import Path

from pytest_libero.episode.record import CaseRecord
from pytest_libero.evidence.layout import ACTIONS_NAME, INDEX_NAME
from pytest_libero.protocol.hashing import sha256_file

REQUIRED = (INDEX_NAME, ACTIONS_NAME)
"""What re-execution reads: the delivered observations' hashes and the actions."""


def missing_files(case_dir: Path, record: CaseRecord) -> list[str]:
    """Why this case cannot be re-executed at all (no folder, no actions, ...)."""
    if not case_dir.is_dir():
        return [f"no case folder {case_dir}"]
    missing = [name for name in REQUIRED if not (case_dir / name).is_file()]
    listed = (record.get("evidence") or {}).get("files") or {}
    missing += [name for name in listed if name not in missing and not (case_dir / name).is_file()]
    return [f"{case_dir / name} is missing" for name in missing]


def altered_files(case_dir: Path, record: CaseRecord) -> list[dict[str, str]]:
    """Evidence files whose bytes no longer have the sha256 the record holds."""
    listed = (record.get("evidence") or {}).get("files") or {}
    altered = []
    for name, meta in sorted(listed.items()):
        found = sha256_file(case_dir / name)
        if found != meta["sha256"]:
            altered.append({"field": f"file {name}", "recorded": meta["sha256"], "found": found})
    return altered
