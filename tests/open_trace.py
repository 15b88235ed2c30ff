"""Every file a process opens under watched folders, written to a log: an audit hook.

The install tests copy this module into a fresh venv's site-packages with a ``.pth``
line that imports it, so every Python process of that venv (pytest, its xdist workers,
the forkserver and its case processes, ``pytest-libero``) installs the hook at start-up.
It does nothing unless ``PYTEST_LIBERO_OPEN_TRACE`` names a folder; the folders to watch
are ``PYTEST_LIBERO_OPEN_WATCH`` (``os.pathsep``-separated). Each process appends the
opened paths, one a line, to ``opens.<pid>`` in the trace folder. Standard library only:
it runs before anything else is importable.
"""

from __future__ import annotations

import os
import sys

TRACE = os.environ.get("PYTEST_LIBERO_OPEN_TRACE")
WATCHED = tuple(os.path.realpath(folder) + os.sep
                for folder in os.environ.get("PYTEST_LIBERO_OPEN_WATCH", "").split(os.pathsep)
                if folder)
_log: dict[int, int] = {}  # pid -> the log's descriptor (a forked child opens its own)
_busy = False


def _path(target: object) -> str | None:
    """The opened path, absolute; None for a descriptor or anything else."""
    if isinstance(target, int):
        return None
    try:
        name = os.fsdecode(os.fspath(target))  # type: ignore[arg-type]
    except TypeError:
        return None
    return os.path.realpath(name)


def _hook(event: str, args: tuple[object, ...]) -> None:
    global _busy
    if event != "open" or _busy or not args:
        return
    _busy = True
    try:
        path = _path(args[0])
        if path is None or not path.startswith(WATCHED):
            return
        pid = os.getpid()
        if pid not in _log:
            _log[pid] = os.open(os.path.join(str(TRACE), f"opens.{pid}"),
                                os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        os.write(_log[pid], (path + "\n").encode("utf-8", "surrogateescape"))
    finally:
        _busy = False


if TRACE and WATCHED:
    sys.addaudithook(_hook)
