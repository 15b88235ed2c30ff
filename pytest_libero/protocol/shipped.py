"""The package's own data files, read through one rule: a damaged one is a usage error.

The catalog, the inventories, the OOD catalog, the full-mode validation, the room and
instruction tables, the known renderers, the published figures and the profiles ship
inside the package, and nothing a user does edits them. One that is missing, cut short,
not JSON or not of its shape means the installation is damaged, so every reader of one
says the same line, naming the file: ``<file> in the installed pytest-libero is damaged
(<what was found>): reinstall pytest-libero``. It is a SetupError, the usage error a run
gives before any case (a session reads every file first: ``session.check_shipped_data``),
never a traceback.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any, Final

from pytest_libero.data import data_path
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.text import clipped

__all__ = ["DamagedInstall", "damaged", "need", "reading", "shipped_bytes", "shipped_json"]

REINSTALL: Final = "reinstall pytest-libero"
_WHY_LIMIT: Final = 120
"""Characters of what was found that the line quotes."""


class DamagedInstall(SetupError):
    """A shipped data file is missing, cut short, not JSON or not of its shape."""


def damaged(name: str, why: str) -> DamagedInstall:
    """The one line for a damaged shipped file ``name`` (``why``: what was found)."""
    why = clipped(" ".join(why.split()), _WHY_LIMIT)
    return DamagedInstall(f"{name} in the installed pytest-libero is damaged ({why}): {REINSTALL}")


@contextmanager
def reading(name: str) -> Iterator[None]:
    """Whatever goes wrong while the file ``name`` is read and interpreted becomes its
    damaged line: a missing key, a wrong type, a bad value. Use it around a reader's
    whole interpretation of the file, and nothing else (it would blame the file)."""
    try:
        yield
    except DamagedInstall:
        raise
    except (OSError, ValueError, KeyError, TypeError, AttributeError, IndexError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        if isinstance(exc, KeyError):
            why = f"no {why}"
        raise damaged(name, f"{type(exc).__name__}: {why}") from None


def shipped_bytes(name: str) -> bytes:
    """The bytes of the shipped file ``name`` (a path under ``pytest_libero/data``)."""
    with reading(name):
        return data_path(name).read_bytes()


def shipped_json(name: str, schema: str | None = None) -> dict[str, Any]:
    """The shipped JSON file ``name``: a table, of ``schema`` when one is given."""
    return json_table(name, shipped_bytes(name), schema)


def json_table(name: str, raw: bytes, schema: str | None = None) -> dict[str, Any]:
    """``raw``, the bytes of the shipped file ``name``, read as a JSON table."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise damaged(name, "not UTF-8") from None
    except json.JSONDecodeError as exc:
        raise damaged(name, f"not JSON: {exc}") from None
    if not isinstance(data, dict):
        raise damaged(name, f"a {type(data).__name__}, not a table")
    if schema is not None and data.get("schema") != schema:
        raise damaged(name, f"schema {clipped(repr(data.get('schema')), 40)}, not {schema!r}")
    return data


def need(table: Mapping[str, Any], key: str, kind: type | tuple[type, ...], where: str = "") -> Any:
    """``table[key]`` when it is of ``kind`` (a bool is never an int here); KeyError or
    TypeError naming it otherwise, for :func:`reading` to turn into the damaged line."""
    if not isinstance(table, Mapping):
        raise TypeError(f"{where or 'a value'} is {_a(type(table).__name__)}, not a table")
    value = table[key]
    kinds = kind if isinstance(kind, tuple) else (kind,)
    if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
        names = " or ".join(k.__name__ for k in kinds)
        raise TypeError(f"{where}{key} is {_a(type(value).__name__)}, not {_a(names)}")
    return value


def _a(word: str) -> str:
    return f"{'an' if word[:1] in tuple('aeiou') else 'a'} {word}"
