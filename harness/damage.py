"""A damaged installation, made on a copy: the package copied, then one data file broken.

Tests of a damaged installation work on a copy of ``pytest_libero`` under a temporary
folder, put first on the path of the process they start (PYTHONPATH), never on the
checkout's own data files, which other tests read at the same time.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

PACKAGE: Final = Path(__file__).resolve().parents[1] / "pytest_libero"
DROP: Final = "<drop>"
"""An edit's value that removes the key instead."""
HOWS: Final = ("deleted", "cut", "not-utf8", "a-list", "edit")


@dataclass(frozen=True)
class Damage:
    """One way a shipped file is broken: ``deleted``, ``cut`` (its first half kept),
    ``not-utf8``, ``a-list`` (a JSON list in place of the table) or ``edit`` (the value
    at ``where``, a path of keys and indices into the JSON, replaced by ``value``)."""

    file: str
    """Its path under pytest_libero/data."""
    how: str
    where: tuple[str | int, ...] = ()
    value: Any = DROP

    def __post_init__(self) -> None:
        if self.how not in HOWS:
            raise ValueError(f"unknown damage {self.how!r}; one of {HOWS}")


def copy_package(root: Path) -> Path:
    """A copy of the checkout's package under ``root`` (``root`` goes on PYTHONPATH)."""
    shutil.copytree(PACKAGE, root / "pytest_libero", ignore=shutil.ignore_patterns("__pycache__"))
    return root


def apply(damage: Damage, root: Path) -> None:
    """Break ``damage.file`` in the copy under ``root`` (never the checkout's)."""
    path = root / "pytest_libero" / "data" / damage.file
    if PACKAGE in path.resolve().parents:
        raise ValueError(f"{path} is the checkout's own file; damage a copy")
    if damage.how == "deleted":
        path.unlink()
    elif damage.how == "cut":
        data = path.read_bytes()
        path.write_bytes(data[: len(data) // 2])
    elif damage.how == "not-utf8":
        path.write_bytes(b"\xff\xfe" + path.read_bytes())
    elif damage.how == "a-list":
        path.write_text("[]\n", encoding="utf-8")
    else:
        document = json.loads(path.read_text(encoding="utf-8"))
        *parents, last = damage.where
        holder = document
        for key in parents:
            holder = holder[key]
        if damage.value == DROP:
            del holder[last]
        else:
            holder[last] = damage.value
        path.write_text(json.dumps(document), encoding="utf-8")
