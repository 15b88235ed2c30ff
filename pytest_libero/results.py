"""The run folder: <results root>/<profile>/<run id>/ with run.json and results.jsonl.

Only the controller writes here, from the records that reports carry, so a run
under xdist still has one results.jsonl. Each line is flushed and fsynced as its case
ends: a killed run keeps every case that finished.
"""

from __future__ import annotations

import json
import os
import secrets
import time
from pathlib import Path
from typing import Any, TextIO

from pytest_libero.errors import SetupError


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
        else:
            try:
                self.path.mkdir(parents=True, exist_ok=False)
            except FileExistsError:
                raise SetupError(
                    f"run folder {self.path} already exists; a run never overwrites another. "
                    "Choose another --libero-run-id, leave it unset, or --libero-resume it"
                ) from None
        self._results: TextIO = (self.path / "results.jsonl").open("a", encoding="utf-8")

    def write_json(self, name: str, data: Any) -> Path:
        return write_json_atomic(self.path / name, data)

    def append_result(self, record: dict[str, Any]) -> None:
        self._results.write(json.dumps(record, sort_keys=True, default=str) + "\n")
        self._results.flush()
        os.fsync(self._results.fileno())

    def close(self) -> None:
        self._results.close()


def write_json_atomic(target: Path, data: Any) -> Path:
    """Write JSON so a reader never sees half a file: temp file, fsync, rename."""
    tmp = target.with_suffix(target.suffix + ".tmp")
    with tmp.open("w", encoding="utf-8") as stream:
        json.dump(data, stream, indent=1, sort_keys=True, default=str)
        stream.write("\n")
        stream.flush()
        os.fsync(stream.fileno())
    tmp.replace(target)
    return target


def read_results(path: Path) -> list[dict[str, Any]]:
    """Read results.jsonl, ignoring a torn last line left by a killed writer."""
    records = []
    for line in (path / "results.jsonl").read_text(encoding="utf-8").splitlines():
        try:
            records.append(json.loads(line))
        except json.JSONDecodeError:
            continue
    return records
