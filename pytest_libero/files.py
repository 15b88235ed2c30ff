"""Writing and reading the project's files so that a crash never leaves half of one,
and a hostile folder never hangs or floods a reader.

One atomic writer (temp file, fsync, rename), one JSON writer every file goes through
(strict JSON, whatever a policy put in its metadata), one JSON-lines reader with one rule
for a torn last line, one opener for what a reader reads from a folder it was handed
(regular files only, bounded, and, inside a case folder, never through a link), and one
tail for the logs shown in error messages.
"""

from __future__ import annotations

import errno
import json
import math
import os
import secrets
import shutil
import stat
from collections.abc import Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, BinaryIO, Final

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


LINE_LIMIT = 64 << 20
"""Longest JSON line any reader takes (the evidence writes lines of a few kilobytes)."""


class Refused(ValueError):
    """A file a reader will not read, and why: not a regular file (a FIFO would block
    the reader, a device never ends), reached through a symbolic link where none may
    be, or larger than a valid one can be. The message names the file."""


_KINDS = ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISCHR, "a character device"),
          (stat.S_ISBLK, "a block device"), (stat.S_ISSOCK, "a socket"),
          (stat.S_ISDIR, "a folder"), (stat.S_ISLNK, "a symbolic link"))


def _not_regular(path: Path, mode: int) -> Refused | None:
    for test, kind in _KINDS:
        if test(mode):
            return Refused(f"{path} is {kind}, not a regular file")
    return None if stat.S_ISREG(mode) else Refused(f"{path} is not a regular file")


def open_regular(path: Path, *, links: bool = True) -> BinaryIO:
    """``path`` opened for reading, only if it is a regular file (:class:`Refused`
    otherwise; OSError when it is missing or this user cannot open it).

    Nothing but a regular file is ever opened: a FIFO is refused before a reader waits
    on it, a device before it is read forever. With ``links=False`` neither the file
    nor the folder holding it may be a symbolic link, so what is read lies in that
    folder (a case folder's files: nothing a record names is read from elsewhere).
    """
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC
    if links:
        found = os.stat(path)
        refused = _not_regular(path, found.st_mode)
        if refused is not None:
            raise refused
        fd = os.open(path, flags)
    else:
        fd = _open_inside(path, flags)
    try:
        refused = _not_regular(path, os.fstat(fd).st_mode)
        if refused is not None:
            raise refused
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _open_inside(path: Path, flags: int) -> int:
    """``path.name`` opened inside ``path.parent``, following no link at either."""
    try:
        folder = os.open(path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.lexists(path.parent):
            raise _not_regular_folder(path.parent) from None
        raise
    try:
        found = os.stat(path.name, dir_fd=folder, follow_symlinks=False)
        refused = _not_regular(path, found.st_mode)
        if refused is not None:
            raise refused
        return os.open(path.name, flags | os.O_NOFOLLOW, dir_fd=folder)
    finally:
        os.close(folder)


def _not_regular_folder(path: Path) -> Refused:
    kind = "a symbolic link" if os.path.islink(path) else "not a folder"
    return Refused(f"{path} is {kind}; a folder is read only as it was written, never "
                   "through a link")


def read_capped(path: Path, limit: int, *, links: bool = True) -> bytes:
    """A regular file's bytes (:func:`open_regular`), refused when it holds more than
    ``limit``: no valid file of its kind is that large, and nothing more is read."""
    with open_regular(path, links=links) as stream:
        size = os.fstat(stream.fileno()).st_size
        data = stream.read(limit + 1) if size <= limit else b""
        if size > limit or len(data) > limit:
            raise Refused(f"{path} holds {max(size, len(data))} bytes, more than a valid one "
                          f"can ({limit})")
        return data


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


def unwritable_problem(target: Path) -> str | None:
    """Why :func:`write_text_atomic` could not replace ``target``, found before the work
    that would fill it is done (a temporary file is made and removed), or None."""
    if target.is_dir():
        return "a folder is in the way"
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    try:
        tmp.open("x").close()
        tmp.unlink()
    except OSError as exc:
        return exc.strerror or str(exc)
    return None


def new_folder_problem(target: Path) -> str | None:
    """Why a new folder could not be made at ``target`` (under a regular file, on a
    filesystem that holds no files, without permission), found before the work that
    would fill it: a probe folder is made where it would go and removed, with any folder
    made above it. None when it can be made."""
    made = [p for p in (target.parent, *target.parent.parents) if not os.path.lexists(p)]
    above = next(p for p in (target.parent, *target.parent.parents) if os.path.lexists(p))
    if not above.is_dir():
        return f"{above} is a file, not a folder"
    probe = target.with_name(f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}.probe")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        probe.mkdir()
        probe.rmdir()
    except OSError as exc:
        return exc.strerror or str(exc)
    finally:
        for folder in made:  # deepest first
            with suppress(OSError):
                folder.rmdir()
    return None


def write_json_atomic(target: Path, data: Any) -> Path:
    """JSON with sorted keys, written atomically (see :func:`write_text_atomic`)."""
    return write_text_atomic(target, json_text(data, indent=1) + "\n")


@contextmanager
def staged_folder(target: Path) -> Iterator[Path]:
    """A new folder written whole or not at all: the caller writes into a hidden folder
    beside ``target``, renamed to ``target`` when the block ends; on any error the hidden
    folder, and any folder made to hold it, is removed: nothing is left. OSError when
    either cannot be made (a file in the way, ``target`` taken meanwhile)."""
    made = [p for p in (target.parent, *target.parent.parents) if not os.path.lexists(p)]
    work = target.with_name(f".{target.name}.{os.getpid()}-{secrets.token_hex(4)}.partial")
    try:
        target.parent.mkdir(parents=True, exist_ok=True)
        work.mkdir()
        yield work
        os.rename(work, target)
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        for folder in made:  # the folders made for it, deepest first, if still empty
            try:
                folder.rmdir()
            except OSError:
                break
        raise


def read_jsonl(path: Path, max_line: int = LINE_LIMIT) -> Iterator[dict[str, Any]]:
    """Yield each line's object (the file opened by :func:`open_regular`).

    Lines are written whole and end in a newline, so a last line without one was cut
    short by a killed writer: it is ignored. Any other line that does not parse raises
    :class:`CorruptLine` naming the file and the line: nothing is skipped silently. A
    line longer than ``max_line`` bytes, torn or not, is one too (no writer writes one,
    and no more of it is read).
    """
    with open_regular(path) as stream:
        for number, raw in enumerate(iter(lambda: stream.readline(max_line + 1), b""), start=1):
            if len(raw) > max_line:
                raise CorruptLine(f"{path}:{number}: a line of more than {max_line} bytes, "
                                  "longer than any line written to it")
            if not raw.endswith(b"\n"):
                return  # torn: only ever the last line
            line = raw.decode("utf-8")
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
