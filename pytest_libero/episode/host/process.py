"""One case process as its host watches it: a state, the phase it last told, a deadline.

    fresh ──Prepare──> SETTING_UP ──Prepared──> SET_UP ──Go──> RUNNING
    fresh ──Run──────────────────────────────────────────────> RUNNING
    SETTING_UP ──Go (its turn came first)──> RUNNING (the set-up's deadline runs on)
    RUNNING ──Finished──> FINISHED ──> KEPT (holds its task's environment) or ENDED
    KEPT ──Run (the task's next state)──> RUNNING
    any live state ──deadline passed──> HUNG (killed);  ──pipe closed, or gone──> DIED

The deadline is the moment the current phase outlives its allowance
(``watchdog.allowance``); a process set up ahead waits for its turn without one.
"""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from enum import Enum
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path

from pytest_libero.config.plan import Watchdog
from pytest_libero.episode.host.messages import Prepare, Stop, ToChild
from pytest_libero.episode.host.watchdog import allowance
from pytest_libero.episode.phases import Phase

EXIT_WAIT_S = 30.0


class State(Enum):
    """Where a case process is in its life (the diagram above); the value says it in words."""

    SETTING_UP = "setting up its case ahead of the case's turn"
    SET_UP = "set up, waiting for its case's turn"
    RUNNING = "running its case"
    FINISHED = "finished its case"
    KEPT = "holding its task's environment for the task's next state"
    HUNG = "hung (killed)"
    DIED = "died"
    ENDED = "ended"


LIVE = frozenset({State.SETTING_UP, State.SET_UP, State.RUNNING, State.FINISHED, State.KEPT})
LOST = frozenset({State.HUNG, State.DIED})


@dataclass(eq=False)
class CaseProcess:
    """A case process and what its host knows of it."""

    process: BaseProcess
    conn: Connection
    state: State
    prepared: Prepare | None = None
    """The set-up it did ahead of its case's turn (case, plan, early log), if any."""
    phase: Phase = Phase.START
    counters: dict[str, int] = field(default_factory=dict)
    deadline: float = math.inf
    """When the current phase has outlived its allowance (``time.monotonic()``)."""

    def send(self, message: ToChild) -> None:
        self.conn.send(message)

    def told(self, phase: Phase, counters: dict[str, int], limits: Watchdog) -> None:
        """It reported ``phase``: the phase's allowance starts now."""
        self.phase, self.counters = phase, counters
        self.deadline = time.monotonic() + allowance(limits, phase)

    def lose(self, state: State) -> None:
        """It hung (then it is killed) or died (then it is waited for: its exit status)."""
        assert state in LOST
        self.state = state
        if state is State.HUNG:
            self.process.kill()
        else:
            self.process.join(EXIT_WAIT_S)

    def exiting(self) -> bool:
        """Whether it has died though its pipe may still be open: a process killed by a
        signal closes its files only once all its threads are gone, which for a
        simulator's renderer threads on a busy machine takes seconds; its main thread is
        a zombie meanwhile."""
        try:
            stat = Path(f"/proc/{self.process.pid}/stat").read_text()
        except OSError:  # reaped already, or no /proc
            return not self.process.is_alive()
        return stat.rsplit(")", 1)[1].split()[0] in ("Z", "X")

    def end(self, *, kill: bool) -> None:
        """Stop it (a :class:`~.messages.Stop` first, unless ``kill``) and reap it."""
        process = self.process
        if not kill and process.is_alive():
            try:
                self.conn.send(Stop())
            except OSError:
                kill = True
        if kill and process.is_alive():
            process.kill()
        process.join(EXIT_WAIT_S)
        if process.is_alive():
            process.kill()
            process.join(EXIT_WAIT_S)
        self.conn.close()
        if self.state not in LOST:
            self.state = State.ENDED
