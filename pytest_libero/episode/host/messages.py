"""What the case host and a case process say to each other over their pipe.

One type per message. The host sends :class:`Run` (a case now), :class:`Prepare` (a
case's set-up ahead of its turn), :class:`Go` (that prepared case's turn) and
:class:`Stop`; the process answers with :class:`Progress`, :class:`Prepared` and
:class:`Finished`. ``Go`` names the case it starts, and the process runs it only if
that is the case it prepared: a turn can never run another case's set-up.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from pytest_libero.catalog.entries import Entry
from pytest_libero.catalog.placement import Placement
from pytest_libero.config.plan import RunPlan
from pytest_libero.episode.phases import Phase
from pytest_libero.episode.record import CaseRecord


@dataclass(frozen=True)
class Run:
    """Run ``entry`` now: set it up, then its episode; ``turn`` is its ``started_at``;
    ``placement``, the rule's answer for it, is handed to the adapter that opens it."""

    plan: RunPlan
    entry: Entry
    case_dir: Path
    turn: float
    placement: Placement


@dataclass(frozen=True)
class Prepare:
    """Set ``entry`` up ahead of its turn, in a fresh process, its output going to
    ``log`` until the case's folder exists; opened as ``placement`` says."""

    plan: RunPlan
    entry: Entry
    log: Path
    placement: Placement


@dataclass(frozen=True)
class Go:
    """The turn of the case prepared in this process (named by ``case_id``). Small, so
    that sending it never waits on a process still busy with that set-up."""

    case_id: str
    case_dir: Path
    turn: float

    @classmethod
    def of(cls, prepared: Prepare, case_dir: Path, turn: float) -> Go:
        return cls(prepared.entry.case_id, case_dir, turn)


@dataclass(frozen=True)
class Stop:
    """End the process (its kept environment, if any, with it)."""


@dataclass(frozen=True)
class Progress:
    """A sign of life: the phase the case is in and its counters so far."""

    phase: Phase
    counters: dict[str, int] = field(default_factory=dict)


@dataclass(frozen=True)
class Prepared:
    """The set-up asked by :class:`Prepare` is over (done or failed: the case's turn
    reports a failure)."""

    case_id: str


@dataclass(frozen=True)
class Finished:
    """The case's record: its process is done with it."""

    record: CaseRecord


ToChild = Run | Prepare | Go | Stop
FromChild = Progress | Prepared | Finished
