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
    """Why this case cannot be re-executed at all: a file it needs is missing, or this
    user cannot read it."""
    listed = (record.get("evidence") or {}).get("files") or {}
    problems = []
    for name in dict.fromkeys([*REQUIRED, *listed]):
        try:
            with (case_dir / name).open("rb"):
                pass
        except FileNotFoundError:
            problems.append(f"{case_dir / name} is missing")
        except OSError as exc:
            problems.append(f"cannot read {case_dir / name} ({exc.strerror or exc}); give "
                            "this user read access to the case folder")
    return problems


def altered_files(case_dir: Path, record: CaseRecord) -> list[dict[str, str]]:
    """Evidence files whose bytes no longer have the sha256 the record holds."""
    listed = (record.get("evidence") or {}).get("files") or {}
    altered = []
    for name, meta in sorted(listed.items()):
        found = sha256_file(case_dir / name)
        recorded = meta.get("sha256") if isinstance(meta, dict) else None
        if found != recorded:
            altered.append({"field": f"file {name}", "recorded": str(recorded), "found": found})
    return altered
