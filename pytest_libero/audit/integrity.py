"""File integrity of one case folder: every evidence file as its record hashed it.

Cheap and done first. It catches a file edited without re-hashing; a file edited and
re-hashed consistently passes here and is caught by re-execution (``replay``). Each file
is opened as the run wrote it (``files.open_regular``: a regular file in the case
folder, never through a link, never a FIFO or a device) and read no further than the
size its record gives it: nothing a record names makes verify hang or read without end.
"""

from __future__ import annotations

from pathlib import Path

from pytest_libero.episode.record import CaseRecord
from pytest_libero.evidence.layout import ACTIONS_NAME, INDEX_NAME
from pytest_libero.files import Refused, folder_name_problem, open_regular
from pytest_libero.protocol.hashing import sha256_stream
from pytest_libero.protocol.text import clipped

REQUIRED = (INDEX_NAME, ACTIONS_NAME)
"""What re-execution reads: the delivered observations' hashes and the actions."""


def missing_files(case_dir: Path, record: CaseRecord) -> list[str]:
    """Why this case cannot be re-executed at all: a file it needs is missing, this user
    cannot read it, or it is not a regular file of the folder."""
    listed = (record.get("evidence") or {}).get("files") or {}
    problems = []
    for name in dict.fromkeys([*REQUIRED, *listed]):
        if folder_name_problem(name) is not None:
            problems.append(f"the record names {clipped(name, 200)!r}, not a file of the "
                            "case folder")
            continue
        try:
            with open_regular(case_dir / name, links=False):
                pass
        except FileNotFoundError:
            problems.append(f"{case_dir / name} is missing")
        except Refused as exc:
            problems.append(f"{exc}; the case folder is damaged")
        except OSError as exc:
            problems.append(f"cannot read {case_dir / name} ({exc.strerror or exc}); give "
                            "this user read access to the case folder")
    return problems


def altered_files(case_dir: Path, record: CaseRecord) -> list[dict[str, str]]:
    """Evidence files whose bytes no longer have the sha256 the record holds (read up to
    one byte past their recorded size: a longer file differs, whatever follows)."""
    listed = (record.get("evidence") or {}).get("files") or {}
    altered = []
    for name, meta in sorted(listed.items()):
        size = int(meta["bytes"])
        try:
            with open_regular(case_dir / name, links=False) as stream:
                digest, read = sha256_stream(stream, size)
        except (OSError, Refused) as exc:  # changed since missing_files looked
            digest, read = f"unreadable ({exc})", 0
        found = digest if read <= size else f"a file longer than its recorded {size} bytes"
        recorded = str(meta["sha256"])
        if found != recorded:
            altered.append({"field": f"file {name}", "recorded": recorded, "found": found})
    return altered
