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
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from pathlib import Path

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
    """Entry point of the case process: run the cases it is sent, one at a time.

    Each job is ``(plan, entry, case_dir, keep)``; ``None`` ends the process. With
    ``keep`` the adapter keeps a full-mode task's environment for the next job.
    """
    sys.path[:] = sys_path
    from pytest_libero.episode.case import run_case_with_evidence

    adapters = AdapterCache()
    while (job := _next_job(conn)) is not None:
        plan, entry, case_dir, adapters.keep_environments = job
        _capture_output(case_dir)
        heartbeat = _Heartbeat(conn)
        heartbeat.phase("start")
        policy = plan.profile.build_policy()
        try:
            record = run_case_with_evidence(plan, entry, policy, case_dir, listener=heartbeat,
                                            phase=heartbeat.phase, adapters=adapters)
        finally:
            policy.close()
        conn.send(("record", record))
    conn.close()
    # Skip interpreter teardown: the EGL context's exit-time noise stays out of the log.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _next_job(conn: Connection) -> tuple[RunPlan, Entry, Path, bool] | None:
    try:
        job: tuple[RunPlan, Entry, Path, bool] | None = conn.recv()
    except EOFError:  # the worker is gone
        return None
    return job


def _capture_output(case_dir: Path) -> None:
    """Send this process's stdout and stderr to the case's simulator.log."""
    case_dir.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    log = os.open(case_dir / CHILD_OUTPUT, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    os.close(log)


class SimulatorHost:
    """One worker's case processes: a fresh one per case, or in full mode the one that
    ran the task's previous state, still holding the task's environment.

    ``close`` ends a process kept waiting; the plugin calls it when the session ends.
    """

    def __init__(self) -> None:
        self._process: BaseProcess | None = None
        self._conn: Connection | None = None
        self._holds: tuple[str, str, int] | None = None  # adapter, task, last state run

    def run(
        self,
        plan: RunPlan,
        entry: Entry,
        case_dir: Path,
        watchdog: Watchdog,
        progress: Callable[[dict[str, int]], None] | None = None,
    ) -> CaseRecord:
        """Run the case in a case process and return its record, whatever happens to it.

        ``progress`` is told the child's counters at every sign of life.
        """
        from pytest_libero.episode.case import errored_record

        if not self._continues(plan, entry):
            self.close()
        if self._process is None:
            self._start(entry)
        assert self._process is not None and self._conn is not None
        process, conn = self._process, self._conn
        keep = plan.mode == "full" and entry.state is not None
        started = time.time()
        phase, counters = "start", {}
        record: CaseRecord | None = None
        hung = False
        try:
            conn.send((plan, entry, case_dir, keep))
            deadline = time.monotonic() + watchdog.allowance(phase)
            while record is None:
                if not conn.poll(max(0.0, deadline - time.monotonic())):
                    hung = True
                    break
                message = conn.recv()
                if message[0] == "record":
                    record = record_from_json(message[1])
                else:
                    _, phase, counters = message
                    deadline = time.monotonic() + watchdog.allowance(phase)
                    if progress is not None:
                        progress(counters)
        except (EOFError, OSError):
            pass  # the process died: below
        finally:
            if record is None:
                self._end(kill=True)
        if record is not None:
            if keep and record["outcome"] != "errored":
                self._holds = (plan.adapter, entry.task_id, entry.state or 0)
            else:
                self.close()
            return record
        tail = tail_of(case_dir / CHILD_OUTPUT)
        where = f"during {phase} after {counters.get('executed_controls', 0)} controls, " \
                f"{counters.get('policy_calls', 0)} policy calls"
        fault: EpisodeError
        if hung and phase in POLICY_PHASES:
            waited = "connect to" if phase == "policy_reset" else "answer from"
            fault = PolicyHang(
                f"no {waited} {watchdog.policy_name} for {watchdog.allowance(phase):.0f}s "
                f"{where}, beyond the policy's own limits (policy.wait_s / call_timeout); the "
                "case process was killed"
            )
        elif hung:
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

    def close(self) -> None:
        """End the case process kept waiting, if any."""
        self._end(kill=False)

    def _continues(self, plan: RunPlan, entry: Entry) -> bool:
        """Whether the kept process runs this case: the same task at a later state."""
        if self._holds is None or self._process is None or not self._process.is_alive():
            return False
        adapter, task, state = self._holds
        return (plan.mode == "full" and adapter == plan.adapter and task == entry.task_id
                and entry.state is not None and entry.state > state)

    def _start(self, entry: Entry) -> None:
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
        self._process, self._conn = process, parent_conn

    def _end(self, *, kill: bool) -> None:
        process, conn = self._process, self._conn
        self._process, self._conn, self._holds = None, None, None
        if process is None or conn is None:
            return
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
