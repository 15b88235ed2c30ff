"""Writing and reading the project's files so that a crash never leaves half of one.

One atomic writer (temp file, fsync, rename), one JSON writer every file goes through
(strict JSON, whatever a policy put in its metadata), one JSON-lines reader with one rule
for a torn last line, and one tail for the logs shown in error messages.
"""

from __future__ import annotations

import json
import math
import os
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, Final

MAX_NAME = 120
"""Longest name used as one folder (file systems allow 255 bytes; ids stay readable)."""


def folder_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be one folder's name under a results root, or None.

    Every name that becomes a path (a profile's name, a run id) passes this one rule, so
    none can climb out of the root (``..``, ``/``), be absolute, or hold a NUL.
    """
    if not name or name in (".", ".."):
        return "it is empty, '.' or '..'"
    if any(c in name for c in "/\\\0") or not name.isprintable():
        return "it holds '/', '\\', a NUL or another unprintable character"
    if len(name) > MAX_NAME:
        return f"it is longer than {MAX_NAME} characters"
    return None


class CorruptLine(ValueError):
    """A JSON line other than a torn last one does not parse: the file was damaged."""


def write_text_atomic(target: Path, text: str) -> Path:
    """Replace ``target`` so that a reader sees the old file or the new one, whole."""
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with tmp.open("w", encoding="utf-8") as stream:
        stream.write(text)
        stream.flush()
        os.fsync(stream.fileno())
    tmp.replace(target)
    return target


NON_FINITE: Final = {"nan": "NaN", "inf": "Infinity", "-inf": "-Infinity"}
"""How a non-finite number is written: as the string Python's json would have written
bare (``NaN`` is no JSON), so a reader still sees which one it was."""
_DEEPEST: Final = 100
"""Nesting kept by the strict form; anything deeper is written as its text."""


def json_text(data: Any, *, indent: int | None = None,
              separators: tuple[str, str] | None = None, sort_keys: bool = True) -> str:
    """``data`` as strict JSON (RFC 8259), the one rule every file we write follows.

    Anything JSON has no type for is written as its ``str``; a non-finite number as the
    string of :data:`NON_FINITE`; a key that is not a string as its ``str``. A policy's
    metadata is foreign data, so this cannot be left to the caller: Python's json would
    write ``NaN`` bare, and a reader in any other language would refuse the file. The
    usual data, finite and string-keyed, takes the fast path and gives the same bytes.
    """
    options: dict[str, Any] = {"indent": indent, "separators": separators,
                               "sort_keys": sort_keys, "default": str, "allow_nan": False}
    try:
        return json.dumps(data, **options)
    except (ValueError, TypeError):  # NaN or infinity, keys of mixed or other types
        return json.dumps(_strict(data, 0), **options)


def _strict(value: Any, depth: int) -> Any:
    """``value`` with every non-finite number a string and every key a string."""
    if hasattr(value, "item") and callable(value.item) and getattr(value, "shape", None) == ():
        value = value.item()  # a numpy scalar: its Python value (a float32 NaN included)
    if isinstance(value, float) and not math.isfinite(value):
        return NON_FINITE[repr(value)]
    if isinstance(value, (str, int, float, bool)) or value is None:
        return value
    if depth >= _DEEPEST:
        return str(value)
    if isinstance(value, Mapping):
        return {str(k): _strict(v, depth + 1) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_strict(v, depth + 1) for v in value]
    return str(value)


def write_json_atomic(target: Path, data: Any) -> Path:
    """JSON with sorted keys, written atomically (see :func:`write_text_atomic`)."""
    return write_text_atomic(target, json_text(data, indent=1) + "\n")


def read_jsonl(path: Path) -> Iterator[dict[str, Any]]:
    """Yield each line's object.

    Lines are written whole and end in a newline, so a last line without one was cut
    short by a killed writer: it is ignored. Any other line that does not parse raises
    :class:`CorruptLine` naming the file and the line: nothing is skipped silently.
    """
    with path.open("r", encoding="utf-8") as stream:
        for number, line in enumerate(stream, start=1):
            if not line.endswith("\n"):
                return  # torn: only ever the last line
            try:
                yield json.loads(line)
            except json.JSONDecodeError as exc:
                raise CorruptLine(f"{path}:{number}: not a JSON line ({exc})") from None


def tail(text: str, lines: int = 30, empty: str = "(no output)") -> str:
    """The last ``lines`` lines of a log, for an error message."""
    return "\n".join(text.strip("\n").splitlines()[-lines:]) or empty


def tail_of(path: Path, lines: int = 30) -> str:
    """The tail of a log file; says so when there is none."""
    try:
        return tail(path.read_text(errors="replace"), lines)
    except OSError:
        return "(no output captured)"
