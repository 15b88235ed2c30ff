"""Run each case's simulator in a child process watched by a watchdog.

A segfault, an abort, an OOM kill or a hang in MuJoCo must cost one case, never the
pytest worker: the case runs in a fresh child (which also returns every byte the
simulator allocated when it ends). The child reports each phase and every
observation and control over a pipe; the parent kills it when a phase outlives its
allowance and records the case as errored with the signal or timeout, the last
counters seen and the tail of the child's captured output.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import sys
import time
from collections.abc import Callable
from multiprocessing.connection import Connection
from pathlib import Path

import numpy as np

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


def _child(conn: Connection, plan: RunPlan, entry: Entry, case_dir: Path, sys_path: list[str]) -> None:
    """Entry point of the case process: run the case, send its record, exit."""
    from pytest_libero.episode.case import run_case_with_evidence

    case_dir.mkdir(parents=True, exist_ok=True)
    log = os.open(case_dir / CHILD_OUTPUT, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    os.dup2(log, 1)
    os.dup2(log, 2)
    sys.path[:] = sys_path
    heartbeat = _Heartbeat(conn)
    heartbeat.phase("start")
    policy = plan.profile.build_policy()
    try:
        record = run_case_with_evidence(
            plan, entry, policy, case_dir, listener=heartbeat, phase=heartbeat.phase
        )
    finally:
        policy.close()
    conn.send(("record", record))
    conn.close()
    # Skip interpreter teardown: the EGL context's exit-time noise stays out of the log.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def run_isolated(
    plan: RunPlan,
    entry: Entry,
    case_dir: Path,
    watchdog: Watchdog,
    progress: Callable[[dict[str, int]], None] | None = None,
) -> CaseRecord:
    """Run the case in a child process and return its record, whatever happens to it.

    ``progress`` is told the child's counters at every sign of life.
    """
    from pytest_libero.episode.case import errored_record

    context = multiprocessing.get_context("forkserver")
    parent_conn, child_conn = context.Pipe(duplex=False)
    process = context.Process(
        target=_child, args=(child_conn, plan, entry, case_dir, list(sys.path)), daemon=True
    )
    started = time.time()
    process.start()
    child_conn.close()
    phase, counters = "start", {}
    record: CaseRecord | None = None
    hung = False
    try:
        deadline = time.monotonic() + watchdog.allowance(phase)
        while record is None:
            if not parent_conn.poll(max(0.0, deadline - time.monotonic())):
                hung = True
                break
            try:
                message = parent_conn.recv()
            except EOFError:
                break
            if message[0] == "record":
                record = record_from_json(message[1])
            else:
                _, phase, counters = message
                deadline = time.monotonic() + watchdog.allowance(phase)
                if progress is not None:
                    progress(counters)
    finally:
        if process.is_alive() and record is None:
            process.kill()
        process.join(30)
        parent_conn.close()
    if record is not None:
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


def _describe_exit(code: int | None) -> str:
    if code is None:
        return "no exit status"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit status {code}"
