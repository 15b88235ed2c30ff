"""The case host: one worker's case processes, which one runs each case, and when the
next case starts setting up.

A case runs in a process set up for it ahead of its turn, in the kept process whose
environment it continues, or in a fresh one, as one rule decides at the case's turn
(``catalog/placement.py``). With ``prebuild`` the process of the case pytest runs next
on this worker starts, and sets its episode up, once the running case's own set-up is
over; it is not started when the next case continues in the environment this case
leaves behind. Whatever happens to a case's
process (a hang, a crash, a lost set-up, a process that cannot start), the case gets a
record saying so, and only that case.
"""

from __future__ import annotations

import math
import os
import tempfile
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing import connection
from pathlib import Path

from pytest_libero.catalog.entries import Entry
from pytest_libero.catalog.placement import Place, Placement, Process, Turn, decide
from pytest_libero.config.plan import RunPlan, Watchdog
from pytest_libero.episode.case import errored_record
from pytest_libero.episode.host.child import CHILD_OUTPUT, move_log
from pytest_libero.episode.host.launch import Launcher, forkserver_launcher
from pytest_libero.episode.host.messages import (
    Finished,
    Go,
    Prepare,
    Prepared,
    Progress,
    Run,
)
from pytest_libero.episode.host.process import LIVE, CaseProcess, State
from pytest_libero.episode.host.watchdog import ProcessNotStarted, lost_fault
from pytest_libero.episode.phases import BEFORE_EPISODE, Phase
from pytest_libero.episode.record import CaseRecord, record_from_json
from pytest_libero.files import tail_of
from pytest_libero.protocol.errors import EpisodeError

Counters = Callable[[dict[str, int]], None]


@dataclass(eq=False)
class _Kept:
    """A process holding its task's environment, and where in the task that is."""

    case: CaseProcess
    place: Place


class SimulatorHost:
    """One worker's case processes: at most one running, one kept with its task's
    environment, and one set up ahead for the next case. ``close`` ends every one left;
    the plugin calls it when the session ends (also on Ctrl-C)."""

    def __init__(self, *, prebuild: bool = True, launcher: Launcher = forkserver_launcher) -> None:
        self.prebuild = prebuild
        self._launch = launcher
        self._running: CaseProcess | None = None
        self._kept: _Kept | None = None
        self._ahead: CaseProcess | None = None

    def run(
        self,
        plan: RunPlan,
        entry: Entry,
        case_dir: Path,
        watchdog: Watchdog,
        progress: Counters | None = None,
        next_entry: Entry | None = None,
    ) -> CaseRecord:
        """Run the case in a case process and return its record, whatever happens to it.

        ``progress`` is told the child's counters at every sign of life. ``next_entry``
        is the case this worker runs after this one, if pytest knows it.
        """
        started = time.time()
        placement = decide(self._turn(plan, entry, next_entry))
        try:
            case = self._take(entry, placement)
        except Exception as exc:  # noqa: BLE001 - no fork, no descriptors, a dead forkserver
            fault = ProcessNotStarted(f"could not start a case process for {entry.case_id} "
                                      f"({type(exc).__name__}: {exc})")
            return _errored(plan, entry, fault, {}, case_dir, started)
        self._running = case
        set_up_next = placement.prepare_next
        record: CaseRecord | None = None
        try:
            if case.state in LIVE:
                self._send_turn(case, plan, entry, case_dir, started, watchdog, placement)
            while record is None and case.state in LIVE:
                spoke, record = self._watch(case, watchdog)
                if spoke and progress is not None:
                    progress(case.counters)
                if set_up_next and case.phase not in BEFORE_EPISODE:
                    assert next_entry is not None
                    set_up_next = False
                    self._prepare(plan, next_entry, watchdog)
        except OSError:
            case.lose(State.DIED)
        finally:
            if record is None:  # lost, or interrupted (Ctrl-C): it is killed either way
                case.end(kill=True)
            self._running = None
        if record is None:
            return self._lost_record(case, plan, entry, case_dir, watchdog, started)
        kept = placement.kept_after(record["outcome"])
        if kept is not None:
            case.state, case.prepared = State.KEPT, None
            self._kept = _Kept(case, kept)
        else:
            case.end(kill=False)
        return record

    def close(self) -> None:
        """End every case process left: one interrupted mid-case, a kept one, one set
        up ahead."""
        if self._running is not None:
            self._running.end(kill=True)
            self._running = None
        self._end_kept()
        self.discard_prepared()

    def discard_prepared(self) -> None:
        """End the process set up ahead for a case that will not run (a skip, a stop),
        and remove its log."""
        ahead, self._ahead = self._ahead, None
        if ahead is not None:
            ahead.end(kill=True)
            if ahead.prepared is not None:
                ahead.prepared.log.unlink(missing_ok=True)

    def _turn(self, plan: RunPlan, entry: Entry, next_entry: Entry | None) -> Turn:
        """What this host holds at ``entry``'s turn, as the placement rule reads it. A
        set-up done under another plan serves none of this plan's cases."""
        held = self._kept
        prepared = self._ahead.prepared if self._ahead is not None else None
        return Turn(entry,
                    held=held.place if held is not None else None,
                    held_alive=held is None or held.case.process.is_alive(),
                    ahead=prepared.entry if prepared is not None and prepared.plan == plan else None,
                    next_entry=next_entry, prebuild=self.prebuild)

    def _take(self, entry: Entry, placement: Placement) -> CaseProcess:
        """The process ``placement`` runs the case in; a set-up for another case and a
        held process it lets go are ended."""
        if placement.process is not Process.AHEAD:
            self.discard_prepared()
        if placement.end_held:
            self._end_kept()
        if placement.process is Process.AHEAD:
            ahead, self._ahead = self._ahead, None
            assert ahead is not None
            return ahead
        if placement.process is Process.KEPT:
            held, self._kept = self._kept, None
            assert held is not None
            return held.case
        process, conn = self._launch(entry)
        return CaseProcess(process, conn, State.RUNNING)

    def _end_kept(self) -> None:
        held, self._kept = self._kept, None
        if held is not None:
            held.case.end(kill=False)

    def _send_turn(self, case: CaseProcess, plan: RunPlan, entry: Entry, case_dir: Path,
                   turn: float, watchdog: Watchdog, placement: Placement) -> None:
        """Tell the process its case's turn has come. A set-up still under way keeps the
        deadline it runs under; any other phase starts now."""
        if case.prepared is not None:
            case.send(Go.of(case.prepared, case_dir, turn))
        else:
            case.send(Run(plan, entry, case_dir, turn, placement))
        if case.state is not State.SETTING_UP:
            case.told(Phase.START, {}, watchdog)
        case.state = State.RUNNING

    def _prepare(self, plan: RunPlan, entry: Entry, watchdog: Watchdog) -> None:
        """Start the next case's process and have it set its episode up now. Anything
        that stops this leaves the case to set up at its turn, as without set-up ahead;
        the running case is never touched by it."""
        # Opened before its turn, its own next case unknown: as its turn will place it.
        placement = decide(Turn(entry, ahead=entry))
        try:
            fd, log = tempfile.mkstemp(prefix=f"pytest-libero-{entry.case_id}-", suffix=".log")
            os.close(fd)
            prepare = Prepare(plan, entry, Path(log), placement)
            try:
                process, conn = self._launch(entry)
            except BaseException:
                prepare.log.unlink(missing_ok=True)
                raise
            case = self._ahead = CaseProcess(process, conn, State.SETTING_UP, prepared=prepare)
            case.send(prepare)
        except Exception as exc:  # noqa: BLE001 - no fork, no temporary file, a dead forkserver
            self.discard_prepared()
            self.prebuild = False  # what failed here would fail again for every case
            warnings.warn(f"pytest-libero: could not set up {entry.case_id} ahead of its turn "
                          f"({type(exc).__name__}: {exc}); this worker's cases now set up at "
                          "their turns (--libero-prebuild=off says so up front)",
                          RuntimeWarning, stacklevel=1)
            return
        case.told(Phase.BUILD, {}, watchdog)

    def _watch(self, case: CaseProcess, watchdog: Watchdog) -> tuple[bool, CaseRecord | None]:
        """Wait for the next sign of life from the running case or the one set up ahead;
        kill either once its phase outlives its allowance. Returns whether ``case``
        spoke, and its record once it sent it."""
        watched = [c for c in (case, self._ahead) if c is not None and c.state in LIVE]
        soonest = min(c.deadline for c in watched)
        timeout = None if soonest == math.inf else max(0.0, soonest - time.monotonic())
        ready = connection.wait([c.conn for c in watched], timeout)
        spoke, record = False, None
        for each in watched:
            if each.conn in ready:
                finished = self._receive(each, watchdog)
                if each is case:
                    spoke, record = True, finished
            elif time.monotonic() >= each.deadline:
                each.lose(State.DIED if each.exiting() else State.HUNG)
        return spoke, record

    @staticmethod
    def _receive(case: CaseProcess, watchdog: Watchdog) -> CaseRecord | None:
        try:
            message = case.conn.recv()
        except (EOFError, OSError):
            case.lose(State.DIED)
            return None
        if isinstance(message, Finished):
            case.state = State.FINISHED
            return record_from_json(message.record)
        if isinstance(message, Prepared):
            if case.state is State.RUNNING:  # its turn came while it set up: it starts now
                case.told(Phase.START, {}, watchdog)
            else:  # waits for its turn, however long the case before it runs
                case.state = State.SET_UP
                case.told(Phase.SET_UP, {}, watchdog)
        elif isinstance(message, Progress):
            case.told(message.phase, message.counters, watchdog)
        return None

    @staticmethod
    def _lost_record(case: CaseProcess, plan: RunPlan, entry: Entry, case_dir: Path,
                     watchdog: Watchdog, started: float) -> CaseRecord:
        """The record of a case whose process hung or died, with the cause and output."""
        log = case_dir / CHILD_OUTPUT
        early = case.prepared.log if case.prepared is not None else None
        if early is not None and early.exists():
            case_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                move_log(early, fd)
            finally:
                os.close(fd)
        process = case.process
        fault = lost_fault(hung=case.state is State.HUNG, phase=case.phase, counters=case.counters,
                           limits=watchdog, exitcode=process.exitcode,
                           ahead=case.prepared is not None, tail=tail_of(log))
        lost = _errored(plan, entry, fault, case.counters, case_dir, started)
        lost["pid"] = process.pid or 0  # the process that ran (and lost) the case
        lost["child_exit"] = process.exitcode
        return lost


def _errored(plan: RunPlan, entry: Entry, fault: EpisodeError, counters: dict[str, int],
             case_dir: Path, started: float) -> CaseRecord:
    record = errored_record(plan, entry, fault, kind=fault.kind, counters=counters, started=started)
    record["evidence_dir"] = str(case_dir)
    return record


def run_isolated(
    plan: RunPlan,
    entry: Entry,
    case_dir: Path,
    watchdog: Watchdog,
    progress: Counters | None = None,
) -> CaseRecord:
    """Run one case in a fresh case process (no process is kept afterwards)."""
    host = SimulatorHost()
    try:
        return host.run(plan, entry, case_dir, watchdog, progress)
    finally:
        host.close()

