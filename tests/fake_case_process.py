"""A scripted stand-in for the case process, for fast tests of the case host.

It speaks the host's messages (``pytest_libero.episode.host.messages``) exactly as the
real case process does, but sets up and steps by sleeping, and fails on cue: a case
named in ``faults`` hangs, dies by a signal or never hears from its policy, in its
set-up or at a step. It keeps a make-believe environment as it is told to, and its
record says which one each case ran in, so a test reads the host's kept-environment
verdicts off the records. Started by :class:`FakeLauncher` with the "fork" start
method: no simulator, no forkserver, milliseconds per process.
"""

from __future__ import annotations

import faulthandler
import multiprocessing
import os
import signal
import time
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.process import BaseProcess
from typing import Any

from pytest_libero.catalog.entries import Entry
from pytest_libero.episode.host.child import CHILD_OUTPUT, capture_output
from pytest_libero.episode.host.messages import (
    Finished,
    Go,
    Prepare,
    Prepared,
    Progress,
    Run,
    Stop,
)
from pytest_libero.episode.phases import Phase


@dataclass(frozen=True)
class Fault:
    """What goes wrong with a case: ``what`` is hang, policy-hang, a signal name
    (SIGSEGV, SIGABRT, SIGKILL) or slow-exit (SIGKILL, its pipe held open for seconds
    after, as a dying simulator's threads hold it); ``when`` is build or step (at
    control ``at``)."""

    what: str
    when: str = "step"
    at: int = 2


@dataclass(frozen=True)
class Script:
    """How every scripted case behaves, and which ones fail how."""

    build_s: float = 0.05
    step_s: float = 0.02
    steps: int = 5
    faults: dict[str, Fault] = field(default_factory=dict)
    long: dict[str, int] = field(default_factory=dict)
    """Cases that run more controls than ``steps``: how many."""


def _say(line: str) -> None:
    """Print to file descriptor 1, where the host expects the process's output (under
    pytest, ``sys.stdout`` is pytest's capture, not the descriptor)."""
    os.write(1, f"fake case process: {line}\n".encode())


def _strike(fault: Fault, conn: Connection, counters: dict[str, int]) -> None:
    _say(f"about to {fault.what}")
    if fault.what == "hang":
        time.sleep(3600)
    if fault.what == "policy-hang":
        conn.send(Progress(Phase.POLICY, dict(counters)))
        time.sleep(3600)
    if fault.what == "slow-exit":
        if os.fork() == 0:  # holds every descriptor, the pipe too, a while longer
            time.sleep(4)
            os._exit(0)
        os.kill(os.getpid(), signal.SIGKILL)
    os.kill(os.getpid(), getattr(signal, fault.what))
    time.sleep(3600)


def _set_up(entry: Entry, script: Script, conn: Connection) -> None:
    fault = script.faults.get(entry.case_id)
    _say(f"setting up {entry.case_id}")
    if fault is not None and fault.when == "build":
        _strike(fault, conn, {})
    time.sleep(script.build_s)


def scripted_child(conn: Connection, script: Script) -> None:
    """The fake case process's loop: one message at a time, as ``child.run_child``."""
    faulthandler.disable()  # pytest's, inherited: a scripted crash needs no traceback
    held: tuple[str, int] | None = None  # the task and state of the environment it keeps
    prepared: Prepare | None = None
    while True:
        try:
            job = conn.recv()
        except EOFError:
            break
        if isinstance(job, Stop):
            break
        if isinstance(job, Prepare):
            capture_output(job.log)
            conn.send(Progress(Phase.BUILD, {}))
            _set_up(job.entry, script, conn)
            prepared = job
            conn.send(Prepared(job.entry.case_id))
            continue
        if isinstance(job, Go):
            assert prepared is not None and prepared.entry.case_id == job.case_id, job
            entry, use, ahead = prepared.entry, prepared.placement, True
        else:
            assert isinstance(job, Run), job
            entry, use, ahead = job.entry, job.placement, False
        capture_output(job.case_dir / CHILD_OUTPUT, moved_from=prepared.log if ahead and prepared else None)
        prepared = None
        conn.send(Progress(Phase.START, {}))
        conn.send(Progress(Phase.POLICY_RESET, {}))
        environment = f"kept from state {held[1]}" if use.continues and held else "fresh"
        if use.continues:
            assert held is not None and held[0] == entry.task_id and entry.state is not None
            assert entry.state > held[1], (held, entry.case_id)
        if not ahead:
            conn.send(Progress(Phase.BUILD, {}))
            _set_up(entry, script, conn)
        conn.send(Progress(Phase.EPISODE, {}))
        fault = script.faults.get(entry.case_id)
        counters = {"policy_calls": 0, "executed_controls": 0}
        for control in range(1, script.long.get(entry.case_id, script.steps) + 1):
            if fault is not None and fault.when == "step" and fault.at == control:
                _strike(fault, conn, counters)
            time.sleep(script.step_s)
            counters = {"policy_calls": control, "executed_controls": control}
            conn.send(Progress(Phase.STEP, dict(counters)))
        held = (use.keep.task, use.keep.state) if use.keep is not None else None
        record: dict[str, Any] = {"case": entry.case_id, "outcome": "failure", "pid": os.getpid(),
                                  "entry": entry.as_dict(),
                                  "environment": environment, "set_up_ahead": ahead,
                                  "kept_use": [use.continues, use.keep is not None],
                                  "started_at": job.turn}
        conn.send(Finished(record))  # type: ignore[arg-type]
    conn.close()


class FakeLauncher:
    """Starts scripted case processes; remembers each one. Fails to start the cases
    named in ``refuse`` (the nth start of them, counting from 1, or every start)."""

    def __init__(self, script: Script, refuse: dict[str, int | None] | None = None) -> None:
        self.script = script
        self.refuse = refuse or {}
        self.started: list[tuple[str, BaseProcess]] = []
        self.tries: dict[str, int] = {}

    def __call__(self, entry: Entry) -> tuple[BaseProcess, Connection]:
        tries = self.tries[entry.case_id] = self.tries.get(entry.case_id, 0) + 1
        if entry.case_id in self.refuse and self.refuse[entry.case_id] in (None, tries):
            raise OSError(11, "Resource temporarily unavailable (scripted)")
        context = multiprocessing.get_context("fork")
        parent, child = context.Pipe(duplex=True)
        process = context.Process(target=scripted_child, args=(child, self.script), daemon=True)
        process.start()
        child.close()
        self.started.append((entry.case_id, process))
        return process, parent

    def alive(self) -> list[str]:
        return [case for case, process in self.started if process.is_alive()]
