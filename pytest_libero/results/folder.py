"""The run folder as a run writes it: created new or resumed, one record appended a line.

Only the controller writes here, from the records that reports carry, so a run
under xdist still has one results.jsonl. Each line is flushed and fsynced as its case
ends: a killed run keeps every case that finished. ``layout`` names the files.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, TextIO

from pytest_libero.episode.record import CaseRecord, record_to_json
from pytest_libero.episode.record_check import RECORD_LIMIT
from pytest_libero.files import write_json_atomic
from pytest_libero.protocol.errors import SetupError
from pytest_libero.results.layout import BEYOND_TORN, RESULTS_NAME, RUN_NAME, missing, torn_path


class RunFolder:
    """One run's folder: created new (never overwriting another run) or resumed."""

    def __init__(self, path: Path, *, resume: bool = False) -> None:
        self.path = path
        if resume:
            if not (path / RUN_NAME).is_file():
                raise missing(path, RUN_NAME, "--libero-resume")
            set_aside_torn_line(path)
        else:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self.path.mkdir()
            except FileExistsError:
                if not self.path.parent.is_dir():
                    raise unwritable(self.path, "a file is in the way") from None
                raise SetupError(
                    f"run folder {self.path} already exists; a run never overwrites another. "
                    "Choose another --libero-run-id, leave it unset, or --libero-resume it"
                ) from None
            except OSError as exc:
                raise unwritable(self.path, exc.strerror or str(exc)) from None
        self._results: TextIO = (self.path / RESULTS_NAME).open("a", encoding="utf-8")

    def write_json(self, name: str, data: Any) -> Path:
        return write_json_atomic(self.path / name, data)

    def append_result(self, record: CaseRecord) -> None:
        self._results.write(record_to_json(record) + "\n")
        self._results.flush()
        os.fsync(self._results.fileno())

    def close(self) -> None:
        self._results.close()


def unwritable(path: Path, reason: str) -> SetupError:
    """The answer when a new run folder cannot be made at ``path``."""
    return SetupError(f"cannot create the run folder {path} ({reason}); give a results "
                      "location that is a folder this user can write (--libero-results, "
                      "or merge's --out)")


def set_aside_torn_line(run_dir: Path) -> Path | None:
    """Move a killed writer's torn last line out of results.jsonl before appending to it.

    Appending after it would glue the next record onto the fragment. The fragment is
    kept, byte for byte, in ``results.jsonl.torn-N`` beside it; returns that file. Only
    the file's tail is read: a torn line is never longer than a record can be, and one
    that is (no line could be that long) is refused, never copied.
    """
    results = run_dir / RESULTS_NAME
    try:
        stream = results.open("r+b")
    except FileNotFoundError:
        return None
    with stream:
        size = os.fstat(stream.fileno()).st_size
        window = min(size, RECORD_LIMIT + 1)
        stream.seek(size - window)
        data = stream.read(window)
        if not data or data.endswith(b"\n"):
            return None
        cut = data.rfind(b"\n") + 1
        if cut == 0 and size > RECORD_LIMIT:
            raise SetupError(f"{results}: its torn last line holds more than {RECORD_LIMIT} "
                             f"bytes, more than any record; {BEYOND_TORN}")
        n = 1
        while (kept := torn_path(run_dir, n)).exists():
            n += 1
        kept.write_bytes(data[cut:])
        stream.truncate(size - window + cut)
        stream.flush()
        os.fsync(stream.fileno())
    return kept
