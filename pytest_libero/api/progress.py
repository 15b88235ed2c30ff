"""What ``evaluate``'s caller sees while the child run goes on.

The run folder is the source: results.jsonl gains a line per finished case, read on
from where the last look stopped (a full run's file is tens of MB). A caller's
``progress(done, total, successes)`` is told each change; without one, a terminal gets
a bar (tqdm's when tqdm is installed, else one redrawn line) and anything else gets
nothing, so a trainer's log file stays clean.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, Protocol, TextIO

from pytest_libero.protocol.errors import SetupError
from pytest_libero.results.layout import RUN_NAME, outcomes_after, read_json

Progress = Callable[[int, int, int], None]
"""``progress(done, total, successes)``: told each time a case finishes."""
LABEL = "pytest-libero evaluate"


class Bar(Protocol):
    def show(self, done: int, total: int, successes: int) -> None: ...

    def close(self) -> None: ...


class LineBar:
    """One line on the terminal, redrawn in place."""

    def __init__(self, terminal: TextIO) -> None:
        self.terminal, self.drawn = terminal, False

    def show(self, done: int, total: int, successes: int) -> None:
        self.terminal.write(f"\r{LABEL}: {done}/{total} cases, {successes} successes")
        self.terminal.flush()
        self.drawn = True

    def close(self) -> None:
        if self.drawn:
            self.terminal.write("\n")


class TqdmBar:
    """tqdm's bar, with the successes beside the count."""

    def __init__(self, tqdm: Any, terminal: TextIO) -> None:
        self.bar = tqdm(total=None, desc=LABEL, unit="case", file=terminal, leave=True)

    def show(self, done: int, total: int, successes: int) -> None:
        self.bar.total = total
        self.bar.n = done
        self.bar.set_postfix(successes=successes, refresh=False)
        self.bar.refresh()

    def close(self) -> None:
        self.bar.close()


class Told:
    """Tells the caller (or the terminal) what the run folder says each time it is asked."""

    def __init__(self, run_dir: Path, progress: Progress | None, terminal: TextIO | None = None) -> None:
        self.run_dir, self.progress = run_dir, progress
        self.terminal = sys.stderr if terminal is None else terminal
        self.bar: Bar | None = None
        self.total: int | None = None
        self.offset, self.done, self.successes = 0, 0, 0
        self.told = False

    def update(self) -> None:
        try:
            if self.total is None:  # run.json is written once, at the session's start
                self.total = len(read_json(self.run_dir, RUN_NAME)["plan"]["selection_cases"])
            outcomes, self.offset = outcomes_after(self.run_dir, self.offset)
        except (SetupError, OSError, ValueError, KeyError, TypeError):
            return  # not started yet: the next poll sees it
        if not outcomes and self.told:
            return
        self.done += len(outcomes)
        self.successes += outcomes.count("success")
        self.told = True
        if self.progress is not None:
            self.progress(self.done, self.total, self.successes)
        elif self.terminal.isatty():
            self.bar = self.bar or _bar(self.terminal)
            self.bar.show(self.done, self.total, self.successes)

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()


def _bar(terminal: TextIO) -> Bar:
    try:
        from tqdm import tqdm  # type: ignore[import-untyped]  # optional; no stubs needed
    except ImportError:
        return LineBar(terminal)
    return TqdmBar(tqdm, terminal)
