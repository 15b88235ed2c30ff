"""What a measurement prints besides its numbers: where and when it ran, and its tables."""

from __future__ import annotations

import contextlib
import datetime
import math
import os
import platform
from collections.abc import Sequence
from pathlib import Path
from typing import Any


def machine_note() -> str:
    """One line: when, where, and how loaded the machine was when the run started."""
    cpu = platform.processor() or "?"
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    load = ", ".join(f"{x:.2f}" for x in os.getloadavg())
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"{now}; {platform.system()} {platform.machine()}, {os.cpu_count()} CPUs ({cpu}); "
        f"Python {platform.python_version()}; MUJOCO_GL={os.environ.get('MUJOCO_GL', '-')}; "
        f"load average {load}"
    )


def print_table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> None:
    """A plain aligned text table (also valid Markdown)."""

    def cell(value: Any) -> str:
        if isinstance(value, float):
            if math.isnan(value):
                return "-"
            return f"{value:.3f}" if abs(value) < 100 else f"{value:.1f}"
        return str(value)

    text = [[cell(v) for v in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in text)) for i, h in enumerate(headers)]
    print("| " + " | ".join(h.ljust(w) for h, w in zip(headers, widths)) + " |")
    print("|" + "|".join("-" * (w + 2) for w in widths) + "|")
    for row in text:
        print("| " + " | ".join(v.ljust(w) for v, w in zip(row, widths)) + " |")
