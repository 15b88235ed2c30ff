"""Run each case's simulator in a child process watched by a watchdog.

A segfault, an abort, an OOM kill or a hang in MuJoCo must cost one case, never the
pytest worker: the case runs in a child process (which also returns every byte the
simulator allocated when it ends). The child reports each phase and every
observation and control over a pipe; the parent kills it when a phase outlives its
allowance and records the case as errored with the signal or timeout, the last
counters seen and the tail of the child's captured output.

Children are forked from the worker's forkserver, which imports the simulator once and
compiles the worker's first scene without rendering (``pytest_libero.episode.preload``),
so a case process starts with robosuite, LIBERO and MuJoCo loaded and MuJoCo's asset
cache holding the robot's, the arena's and that scene's meshes and textures. A fresh
child runs every case, except in full mode: there the child that ran a task's init
state, and its environment, stay for the task's next state, as openpi's
one-environment loop runs them (docs/full-mode.md). An errored case, another task or a
lower state ends that child; the next case gets a fresh one.

Set-up ahead (``--libero-prebuild``, on by default): once a case's own set-up is over,
the process of the case pytest runs next on this worker starts and sets its episode up
(``episode/setup.py``) while the episode runs, so at most two environments exist per
worker. It writes to a temporary log, moved into the case's folder at its turn; a
set-up that crashes or hangs meanwhile is killed and errors its own case at its turn.
A case nobody runs (a stop, a skip) has its process ended and its log removed.
"""

from __future__ import annotations

import math
import multiprocessing
import os
import signal
import sys
import tempfile
import time
import warnings
from collections.abc import Callable
from contextlib import suppress
from dataclasses import dataclass, field
from multiprocessing import connection
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import numpy as np

from pytest_libero.adapters import AdapterCache
from pytest_libero.catalog.entries import Entry
from pytest_libero.config.plan import RunPlan, Watchdog
from pytest_libero.episode.record import CaseRecord, record_from_json
from pytest_libero.files import tail_of
from pytest_libero.policy.contract import Observation, Reply
from pytest_libero.protocol.errors import EnvironmentFault, EpisodeError, PolicyTransportError

CHILD_OUTPUT = "simulator.log"
POLICY_PHASES = ("policy_reset", "policy")
SETUP_PHASES = ("set up", "start", "policy_reset", "build")
"""A case's phases before its episode: the next case's set-up waits for them to end."""


class SimulatorCrash(EnvironmentFault):
    """The case's simulator process died: a signal, or an exit without a record."""

    cause = "simulator_crash"


class SimulatorHang(EnvironmentFault):
    """The case's simulator process stopped reporting progress and was killed."""

    cause = "simulator_hang"


class PolicyHang(PolicyTransportError):
    """The policy gave no answer even past its own limits; the case process was killed."""

    cause = "policy_hang"


class _Heartbeat:
    """Child side: an episode listener and phase reporter writing to the pipe."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.counters: dict[str, int] = {"policy_calls": 0, "executed_controls": 0}

    def phase(self, name: str) -> None:
        self.conn.send(("phase", name, dict(self.counters)))

    def on_observation(self, call: int, observation: Observation) -> None:
        self.counters["policy_calls"] = call - 1
        self.conn.send(("phase", "policy", dict(self.counters)))

    def on_decision(self, call: int, reply: Reply) -> None:
        self.counters["policy_calls"] = call
        self.conn.send(("phase", "step", dict(self.counters)))

    def on_reply(self, call: int, reply: Reply, executed: int) -> None:
        pass

    def on_control(self, control: int, action: np.ndarray, frame: Callable[[], np.ndarray]) -> None:
        self.counters["executed_controls"] = control
        self.conn.send(("phase", "step", dict(self.counters)))


PRELOAD = ["__main__", "pytest_libero.episode.preload"]
"""What each worker's forkserver imports before it forks case processes: the worker's
main script (else every case process runs it again, e.g. the ``pytest`` console
script), then the simulator and the case's own modules."""
WARM_SCENE = "PYTEST_LIBERO_WARM_SCENE"
"""The entry (BDDL and init-state file names) whose scene the forkserver compiles once."""
_EXIT_WAIT_S = 30.0


def _child(conn: Connection, sys_path: list[str]) -> None:
    """Entry point of the case process: set up and run the cases it is sent, in turn.

    ``("run", plan, entry, case_dir, keep, turn)`` runs a case; ``None`` ends the
    process. ``("prepare", plan, entry, keep, log)`` opens the entry's episode ahead of
    its turn, its output going to ``log`` (the case folder is made only when the case
    runs), and ``("go", case_dir, turn)`` then runs that case: a message small enough
    that sending it never waits on a process still busy with its set-up. With ``keep``
    the adapter keeps a full-mode task's environment for the next job.
    """
    sys.path[:] = sys_path
    from pytest_libero.episode.case import run_case_with_evidence
    from pytest_libero.episode.setup import Setup, open_episode

    adapters = AdapterCache()
    setup: Setup | None = None
    early_log: Path | None = None
    while (job := _next_job(conn)) is not None:
        heartbeat = _Heartbeat(conn)
        if job[0] == "prepare":
            _, plan, entry, adapters.keep_environments, log = job
            early_log = Path(log)
            _capture_output(early_log)
            heartbeat.phase("build")
            setup = open_episode(plan, entry, adapters)
            conn.send(("prepared",))
            continue
        if job[0] == "go":  # the case set up above
            _, case_dir, turn = job
        else:
            _, plan, entry, case_dir, adapters.keep_environments, turn = job
        _capture_output(case_dir / CHILD_OUTPUT, moved_from=early_log)
        early_log = None
        heartbeat.phase("start")
        policy = plan.profile.build_policy()
        try:
            record = run_case_with_evidence(plan, entry, policy, case_dir, listener=heartbeat,
                                            phase=heartbeat.phase, adapters=adapters,
                                            setup=setup, turn=turn)
        finally:
            setup = None
            policy.close()
        conn.send(("record", record))
    conn.close()
    # Skip interpreter teardown: the EGL context's exit-time noise stays out of the log.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _next_job(conn: Connection) -> tuple[Any, ...] | None:
    try:
        job: tuple[Any, ...] | None = conn.recv()
    except EOFError:  # the worker is gone
        return None
    return job


def _capture_output(log: Path, moved_from: Path | None = None) -> None:
    """Send this process's stdout and stderr to ``log``, after what ``moved_from`` (the
    log of a set-up done ahead) holds."""
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    if moved_from is not None:
        _move_log(moved_from, fd)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def _move_log(source: Path, fd: int) -> None:
    """Append ``source`` to the open file ``fd`` and remove it (gone already: nothing)."""
    with suppress(FileNotFoundError):
        os.write(fd, source.read_bytes())
        source.unlink()


@dataclass(eq=False)
class _CaseProcess:
    """One case process as the worker watches it."""

    process: BaseProcess
    conn: Connection
    phase: str = "start"
    counters: dict[str, int] = field(default_factory=dict)
    deadline: float = math.inf
    """When the current phase has outlived its allowance (``time.monotonic()``)."""
    record: CaseRecord | None = None
    prepared_for: Entry | None = None
    """The case this process sets up ahead of its turn (None once it is a kept one)."""
    set_up: bool = False
    """That set-up is over (done or failed: the case's turn reports a failure)."""
    turn_sent: bool = False
    """The case's turn has come: the process was told to run it."""
    lost: str | None = None
    """"hung" or "died", once the process is."""
    early_log: Path | None = None
    """Where the set-up done ahead writes its output until the case's folder exists."""
    holds: tuple[str, str, int] | None = None
    """Full mode: the adapter, task and last state of the environment it kept."""

    def told(self, phase: str, counters: dict[str, int], watchdog: Watchdog) -> None:
        self.phase, self.counters = phase, counters
        self.deadline = time.monotonic() + watchdog.allowance(phase)


class SimulatorHost:
    """One worker's case processes: a fresh one per case, or in full mode the one that
    ran the task's previous state, still holding the task's environment.

    With ``prebuild`` the next case's process starts, and sets up its environment, as
    soon as the running case's own set-up is over (pytest says which case a worker runs
    next), so at most two environments exist per worker. A set-up that crashes or hangs
    meanwhile is killed and reported by its own case, at its turn. ``close`` ends every
    process left; the plugin calls it when the session ends (also on Ctrl-C).
    """

    def __init__(self, *, prebuild: bool = True) -> None:
        self.prebuild = prebuild
        self._running: _CaseProcess | None = None
        self._kept: _CaseProcess | None = None
        self._next: _CaseProcess | None = None

    def run(
        self,
        plan: RunPlan,
        entry: Entry,
        case_dir: Path,
        watchdog: Watchdog,
        progress: Callable[[dict[str, int]], None] | None = None,
        next_entry: Entry | None = None,
    ) -> CaseRecord:
        """Run the case in a case process and return its record, whatever happens to it.

        ``progress`` is told the child's counters at every sign of life. ``next_entry``
        is the case this worker runs after this one, if pytest knows it.
        """
        started = time.time()
        case = self._take(plan, entry)
        continues = next_entry is not None and _later_state(plan, entry, next_entry)
        try:
            if case.lost is None:
                self._send_turn(case, plan, entry, case_dir, started, watchdog)
            while case.record is None and case.lost is None:
                if self._watch(case, watchdog) and progress is not None:
                    progress(case.counters)
                if next_entry is not None and not continues and case.phase not in SETUP_PHASES:
                    self._prepare(plan, next_entry, watchdog)
        except OSError:
            case.lost = "died"
        finally:
            if case.record is None:
                self._end(case, kill=True)
                self._running = None
        if case.record is None:
            return self._lost_record(case, plan, entry, case_dir, watchdog, started)
        record, case.record = case.record, None
        if (_keeps(plan, entry) and record["outcome"] != "errored"
                and (next_entry is None or continues)):
            case.holds = (plan.adapter, entry.task_id, entry.state or 0)
            case.prepared_for, case.early_log = None, None  # a kept process from now on
            self._kept = case
        else:
            self._end(case, kill=False)
        self._running = None
        return record

    def close(self) -> None:
        """End every case process left: one interrupted mid-case, a kept one, one set
        up ahead."""
        if self._running is not None:
            self._end(self._running, kill=True)
            self._running = None
        if self._kept is not None:
            self._end(self._kept, kill=False)
            self._kept = None
        self.discard_prepared()

    def discard_prepared(self) -> None:
        """End the process set up ahead for a case that will not run (a skip, a stop)."""
        if self._next is not None:
            self._discard(self._next)
            self._next = None

    def _take(self, plan: RunPlan, entry: Entry) -> _CaseProcess:
        """The process to run this case: the one set up for it ahead, the kept one the
        task continues in, or a fresh one. Any other is ended first."""
        ahead = self._next
        if ahead is not None and (ahead.prepared_for is None
                                  or ahead.prepared_for.case_id != entry.case_id):
            self.discard_prepared()
        if self._kept is not None and (self._next is not None
                                       or not _continues(self._kept, plan, entry)):
            self._end(self._kept, kill=False)
            self._kept = None
        chosen = self._next or self._kept or self._start(entry)
        self._running, self._next, self._kept = chosen, None, None
        return chosen

    def _send_turn(self, case: _CaseProcess, plan: RunPlan, entry: Entry, case_dir: Path,
                   turn: float, watchdog: Watchdog) -> None:
        """Tell the process its case's turn has come. A set-up still under way keeps the
        deadline it runs under; any other phase starts now."""
        if case.prepared_for is None:
            case.conn.send(("run", plan, entry, case_dir, _keeps(plan, entry), turn))
        else:
            case.conn.send(("go", case_dir, turn))
        case.turn_sent = True
        if case.prepared_for is None or case.set_up:
            case.told("start", {}, watchdog)

    def _prepare(self, plan: RunPlan, entry: Entry, watchdog: Watchdog) -> None:
        """Start the next case's process and have it set its episode up now. Anything
        that stops this leaves the case to set up at its turn, as without set-up ahead;
        the running case is never touched by it."""
        if not self.prebuild or self._next is not None:
            return
        try:
            case = self._next = self._start(entry)
            case.prepared_for, case.phase = entry, "build"
            fd, log = tempfile.mkstemp(prefix=f"pytest-libero-{entry.case_id}-", suffix=".log")
            os.close(fd)
            case.early_log = Path(log)
            case.conn.send(("prepare", plan, entry, _keeps(plan, entry), log))
        except Exception as exc:  # noqa: BLE001 - no fork, no temporary file, a dead forkserver
            self.discard_prepared()
            self.prebuild = False  # what failed here would fail again for every case
            warnings.warn(f"pytest-libero: could not set up {entry.case_id} ahead of its turn "
                          f"({type(exc).__name__}: {exc}); this worker's cases now set up at "
                          "their turns (--libero-prebuild=off says so up front)",
                          RuntimeWarning, stacklevel=1)
            return
        case.told("build", {}, watchdog)

    def _watch(self, case: _CaseProcess, watchdog: Watchdog) -> bool:
        """Wait for the next sign of life from the running case or the one set up ahead;
        kill either once its phase outlives its allowance. True when ``case`` spoke."""
        watched = [c for c in (case, self._next) if c is not None and c.lost is None]
        soonest = min(c.deadline for c in watched)
        timeout = None if soonest == math.inf else max(0.0, soonest - time.monotonic())
        ready = connection.wait([c.conn for c in watched], timeout)
        spoke = False
        for each in watched:
            if each.conn in ready:
                self._receive(each, watchdog)
                spoke = spoke or each is case
            elif time.monotonic() >= each.deadline:
                each.lost = "hung"
                each.process.kill()
        return spoke

    def _receive(self, case: _CaseProcess, watchdog: Watchdog) -> None:
        try:
            message = case.conn.recv()
        except (EOFError, OSError):
            case.lost = "died"
            case.process.join(_EXIT_WAIT_S)
            return
        if message[0] == "record":
            case.record = record_from_json(message[1])
        elif message[0] == "prepared":
            case.set_up = True
            if case.turn_sent:  # its turn came while it set up: it starts the case now
                case.told("start", {}, watchdog)
            else:  # waits for its turn, however long the case before it runs
                case.phase, case.deadline = "set up", math.inf
        else:
            case.told(message[1], message[2], watchdog)

    def _lost_record(self, case: _CaseProcess, plan: RunPlan, entry: Entry, case_dir: Path,
                     watchdog: Watchdog, started: float) -> CaseRecord:
        """The record of a case whose process hung or died, with the cause and output."""
        from pytest_libero.episode.case import errored_record

        log = case_dir / CHILD_OUTPUT
        if case.early_log is not None and case.early_log.exists():
            case_dir.mkdir(parents=True, exist_ok=True)
            fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                _move_log(case.early_log, fd)
            finally:
                os.close(fd)
        tail = tail_of(log)
        phase, counters, process = case.phase, case.counters, case.process
        where = f"during {phase} after {counters.get('executed_controls', 0)} controls, " \
                f"{counters.get('policy_calls', 0)} policy calls"
        if case.prepared_for is not None and phase == "build":
            where += " (its set-up began while the previous case ran)"
        fault: EpisodeError
        if case.lost == "hung" and phase in POLICY_PHASES:
            waited = "connect to" if phase == "policy_reset" else "answer from"
            fault = PolicyHang(
                f"no {waited} {watchdog.policy_name} for {watchdog.allowance(phase):.0f}s "
                f"{where}, beyond the policy's own limits (policy.wait_s / call_timeout); the "
                "case process was killed"
            )
        elif case.lost == "hung":
            fault = SimulatorHang(
                f"the simulator process gave no sign of life for {watchdog.allowance(phase):.0f}s "
                f"{where}; it was killed (raise --libero-step-timeout or --libero-build-timeout "
                f"if this machine is just slow). Output tail:\n{tail}"
            )
        else:
            fault = SimulatorCrash(
                f"the simulator process died ({_describe_exit(process.exitcode)}) {where}. "
                f"Output tail:\n{tail}"
            )
        lost = errored_record(plan, entry, fault, kind=fault.kind, counters=counters, started=started)
        lost["evidence_dir"] = str(case_dir)
        lost["pid"] = process.pid or 0  # the process that ran (and lost) the case
        lost["child_exit"] = process.exitcode
        return lost

    def _start(self, entry: Entry) -> _CaseProcess:
        context = multiprocessing.get_context("forkserver")
        context.set_forkserver_preload(PRELOAD)
        parent_conn, child_conn = context.Pipe(duplex=True)
        process = context.Process(target=_child, args=(child_conn, list(sys.path)), daemon=True)
        # Read by the forkserver if this start launches it (the worker's first case).
        os.environ[WARM_SCENE] = os.pathsep.join((entry.bddl_file, entry.init_states_file))
        try:
            process.start()
        finally:
            os.environ.pop(WARM_SCENE, None)
        child_conn.close()
        return _CaseProcess(process, parent_conn)

    @staticmethod
    def _end(case: _CaseProcess, *, kill: bool) -> None:
        process, conn = case.process, case.conn
        if not kill and process.is_alive():
            try:
                conn.send(None)
            except OSError:
                kill = True
        if kill and process.is_alive():
            process.kill()
        process.join(_EXIT_WAIT_S)
        if process.is_alive():
            process.kill()
            process.join(_EXIT_WAIT_S)
        conn.close()

    def _discard(self, case: _CaseProcess) -> None:
        """End a process set up ahead for a case it will not run, and remove its log."""
        self._end(case, kill=True)
        if case.early_log is not None:
            case.early_log.unlink(missing_ok=True)


def _continues(kept: _CaseProcess, plan: RunPlan, entry: Entry) -> bool:
    """Whether the kept process runs this case: the same task at a later state."""
    if kept.holds is None or not kept.process.is_alive():
        return False
    adapter, task, state = kept.holds
    return (plan.mode == "full" and adapter == plan.adapter and task == entry.task_id
            and entry.state is not None and entry.state > state)


def _keeps(plan: RunPlan, entry: Entry) -> bool:
    """Whether the case's process keeps its environment for the task's later states."""
    return plan.mode == "full" and entry.state is not None


def _later_state(plan: RunPlan, entry: Entry, next_entry: Entry) -> bool:
    """Whether ``next_entry`` is this full-mode task's later state (it continues here)."""
    return (plan.mode == "full" and next_entry.task_id == entry.task_id
            and entry.state is not None and next_entry.state is not None
            and next_entry.state > entry.state)


def run_isolated(
    plan: RunPlan,
    entry: Entry,
    case_dir: Path,
    watchdog: Watchdog,
    progress: Callable[[dict[str, int]], None] | None = None,
) -> CaseRecord:
    """Run one case in a fresh case process (no process is kept afterwards)."""
    host = SimulatorHost()
    try:
        return host.run(plan, entry, case_dir, watchdog, progress)
    finally:
        host.close()


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"
