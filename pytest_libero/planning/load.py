"""Whether other work holds this machine's cores while a plan is made.

The plan's figures (probed, or read from a run) assume the run has the cores to itself: on
a loaded two-core machine a two-worker run measured 234-300 s against a plan of 100 s, and
slower than one worker. The plan cannot see tomorrow's load, but it can see today's and say
that its figures do not hold now: the load before it starts, and while its probe measures,
the share of the probe's time some task waited for a core (Linux's pressure stall count:
2-3% on a quiet two-core machine, 60-80% beside two busy processes).
"""

from __future__ import annotations

import os
from pathlib import Path

LOADAVG = Path("/proc/loadavg")
PRESSURE = Path("/proc/pressure/cpu")
STAT = Path("/proc/stat")
BUSY_WAITING = 0.2
"""A probe that some task waited for a core this share of its time measured a busy machine."""
SHORTEST_S = 5.0
"""A probe shorter than this is not judged: a moment's wait is no share of anything."""
BUSY_SHARE = 0.5
"""A one-minute load of at least this share of the cores (and at least one process) counts
as busy: one other process on two cores already slows a two-worker run by a third."""


def busy_line(cores: int, loadavg: Path | None = None) -> str | None:
    """One line saying the machine is busy and what that means for the plan; None when it
    is quiet or its load cannot be read (not Linux)."""
    try:
        load = float((loadavg or LOADAVG).read_text(encoding="ascii").split()[0])
    except (OSError, ValueError, IndexError, UnicodeDecodeError):
        return None
    if not load >= max(1.0, BUSY_SHARE * cores):  # NaN reads as quiet
        return None
    return (f"this machine is busy (1-minute load {load:.1f} on {cores} cores): the figures below "
            "assume the run has the cores to itself, so while this load lasts it will take longer "
            "than planned and more workers may not help; plan again when it is quiet")


def cpu_waiting_s(pressure: Path | None = None) -> float | None:
    """Seconds since boot that some runnable task waited for a core (the ``some`` line of
    ``/proc/pressure/cpu``); None where the kernel keeps no such count."""
    try:
        for line in (pressure or PRESSURE).read_text(encoding="ascii").splitlines():
            if line.startswith("some "):
                return int(line.rsplit("total=", 1)[1]) / 1e6
    except (OSError, ValueError, IndexError, UnicodeDecodeError):
        return None
    return None


def waiting_share(before: float | None, after: float | None, wall_s: float) -> float | None:
    """The share of ``wall_s`` that some task waited for a core, from two readings."""
    if before is None or after is None or not wall_s >= SHORTEST_S:
        return None
    return min(max((after - before) / wall_s, 0.0), 1.0)


def busy_cpu_s(stat: Path | None = None) -> float | None:
    """CPU seconds every core has spent busy since boot (``/proc/stat``'s first line: all
    but idle and I/O wait); None where it cannot be read."""
    try:
        first = (stat or STAT).read_text(encoding="ascii").splitlines()[0].split()
        ticks = [int(value) for value in first[1:9]]
        return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError, UnicodeDecodeError):
        return None
