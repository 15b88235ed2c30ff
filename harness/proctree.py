"""Processes read from /proc: who is whose child, what each one runs, whether it still
exists, and how much memory it holds. Linux only, as the tests and benchmarks that
look at process trees are."""

from __future__ import annotations

from pathlib import Path


def _stat_fields(pid: int) -> list[str]:
    """/proc/PID/stat after the command name (which may hold spaces and parentheses)."""
    return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()


def children() -> dict[int, list[int]]:
    """Every process's children, by parent pid, as /proc shows them right now."""
    found: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        pid = int(stat.parent.name)
        try:
            ppid = int(_stat_fields(pid)[1])
        except (OSError, IndexError, ValueError):  # gone while we looked
            continue
        found.setdefault(ppid, []).append(pid)
    return found


def descendants(root: int, tree: dict[int, list[int]] | None = None) -> list[int]:
    """Every process below ``root`` (not ``root`` itself); ``tree``: a ``children()``
    snapshot to walk instead of a new one."""
    tree = children() if tree is None else tree
    found, todo = [], list(tree.get(root, []))
    while todo:
        pid = todo.pop()
        found.append(pid)
        todo.extend(tree.get(pid, []))
    return found


def cmdline(pid: int) -> str:
    """The process's command line, space-separated; empty once it is gone."""
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""


def state(pid: int) -> str | None:
    """The process's state letter (R, S, D, Z, ...); None once it has been reaped."""
    try:
        return _stat_fields(pid)[0]
    except (OSError, IndexError):
        return None


def alive(pid: int) -> bool:
    """Running: it exists and is not a zombie waiting to be reaped."""
    return state(pid) not in (None, "Z")


def unreaped(pid: int) -> bool:
    """Still in the process table, a zombie included."""
    return state(pid) is not None


def memory_kib(pid: int) -> tuple[int, int]:
    """(RSS, PSS) of one process in KiB; (0, 0) once it is gone."""
    try:
        text = Path(f"/proc/{pid}/smaps_rollup").read_text()
    except OSError:
        return 0, 0
    fields = {line.split(":")[0]: line.split()[1] for line in text.splitlines()[1:] if ":" in line}
    return int(fields.get("Rss", 0)), int(fields.get("Pss", 0))
