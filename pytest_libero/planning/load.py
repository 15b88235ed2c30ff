"""Whether other work holds this machine's cores while a plan is made.

The plan's figures (probed, or read from a run) assume the run has the cores to itself: on
a loaded two-core machine a two-worker run measured 234-300 s against a plan of 100 s, and
slower than one worker. The plan cannot see tomorrow's load, but it can see today's and say
that its figures do not hold now.
"""

from __future__ import annotations

from pathlib import Path

LOADAVG = Path("/proc/loadavg")
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
