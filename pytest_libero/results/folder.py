"""The run folder: <results root>/<profile>/<run id>/ with run.json and results.jsonl.

Only the controller writes here, from the records that reports carry, so a run
under xdist still has one results.jsonl. Each line is flushed and fsynced as its case
ends: a killed run keeps every case that finished.
"""

from __future__ import annotations

import os
import secrets
import time
from pathlib import Path
from typing import Any, TextIO

from pytest_libero.episode.record import CaseRecord, record_from_json, record_to_json
from pytest_libero.files import CorruptLine, read_jsonl, write_json_atomic
from pytest_libero.protocol.errors import SetupError


def new_run_id() -> str:
    """A sortable, unique run id: UTC time plus a random suffix."""
    return time.strftime("%Y%m%dT%H%M%SZ", time.gmtime()) + "-" + secrets.token_hex(3)


def run_folder_path(root: Path, profile: str, run_id: str, shard: tuple[int, int] | None) -> Path:
    """<root>/<profile>/<run id>, and one level more per shard of a sharded run."""
    path = root / profile / run_id
    return path / f"shard-{shard[0]}-of-{shard[1]}" if shard else path


def run_id_of(path: Path) -> str:
    """The run id of a run folder, a shard folder included."""
    return path.parent.name if path.name.startswith("shard-") else path.name


class RunFolder:
    """One run's folder: created new (never overwriting another run) or resumed."""

    def __init__(self, path: Path, *, resume: bool = False) -> None:
        self.path = path
        if resume:
            if not (path / "run.json").is_file():
                raise SetupError(f"--libero-resume={path}: not a run folder (no run.json)")
            set_aside_torn_line(path / "results.jsonl")
        else:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.path.mkdir()
            except FileExistsError:
                if not self.path.parent.is_dir():
                    raise _unwritable(self.path, "a file is in the way") from None
                raise SetupError(
                    f"run folder {self.path} already exists; a run never overwrites another. "
                    "Choose another --libero-run-id, leave it unset, or --libero-resume it"
                ) from None
            except OSError as exc:
                raise _unwritable(self.path, exc.strerror or str(exc)) from None
        self._results: TextIO = (self.path / "results.jsonl").open("a", encoding="utf-8")

    def write_json(self, name: str, data: Any) -> Path:
        return write_json_atomic(self.path / name, data)

    def append_result(self, record: CaseRecord) -> None:
        self._results.write(record_to_json(record) + "\n")
        self._results.flush()
        os.fsync(self._results.fileno())

    def close(self) -> None:
        self._results.close()


def _unwritable(path: Path, reason: str) -> SetupError:
    return SetupError(f"cannot create the run folder {path} ({reason}); give a results "
                      "location that is a folder this user can write (--libero-results, "
                      "or merge's --out)")


def set_aside_torn_line(results: Path) -> Path | None:
    """Move a killed writer's torn last line out of ``results`` before appending to it.

    Appending after it would glue the next record onto the fragment. The fragment is
    kept, byte for byte, in ``results.jsonl.torn-N`` beside it; returns that file.
    """
    try:
        data = results.read_bytes()
    except FileNotFoundError:
        return None
    if not data or data.endswith(b"\n"):
        return None
    cut = data.rfind(b"\n") + 1
    n = 1
    while (kept := results.with_name(f"{results.name}.torn-{n}")).exists():
        n += 1
    kept.write_bytes(data[cut:])
    with results.open("r+b") as stream:
        stream.truncate(cut)
        stream.flush()
        os.fsync(stream.fileno())
    return kept


def read_results(path: Path) -> list[CaseRecord]:
    """Read results.jsonl (a torn last line, left by a killed writer, is ignored); a line
    that is not a case record is refused naming the file, the line and the field."""
    results = path / "results.jsonl"
    try:
        if not results.is_file():
            raise SetupError(f"{path} has no results.jsonl: not a run folder, or an incomplete "
                             "copy of one (a run creates it before its first case)")
        records = []
        for number, line in enumerate(read_jsonl(results), start=1):
            try:
                records.append(record_from_json(line))
            except ValueError as exc:
                raise SetupError(f"{results}:{number}: {exc}; results.jsonl is damaged beyond "
                                 "a torn last line") from None
        return records
    except CorruptLine as exc:
        raise SetupError(f"{exc}; results.jsonl is damaged beyond a torn last line") from None
    except UnicodeDecodeError as exc:
        raise SetupError(f"{results}: not UTF-8 text ({exc.reason}); results.jsonl is damaged "
                         "beyond a torn last line") from None
    except OSError as exc:
        raise SetupError(f"cannot read {results} ({exc.strerror or exc}); give this user read "
                         "access to the run folder") from None
