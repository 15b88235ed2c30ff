"""The case process: sets up and runs the cases its host sends it, reporting as it goes.

It runs in a process forked from the worker's forkserver (``launch.py``). Everything
it prints goes to the case's ``simulator.log`` (until a prepared case's turn, to a
temporary log that is then moved there). With a kept environment it runs its task's
next states, one :class:`~.messages.Run` after another, until told to stop.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from contextlib import suppress
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from pytest_libero.adapters import AdapterCache
from pytest_libero.episode.host.messages import (
    Finished,
    Go,
    Prepare,
    Prepared,
    Progress,
    Stop,
    ToChild,
)
from pytest_libero.episode.phases import Phase
from pytest_libero.policy.contract import Observation, Reply
from pytest_libero.protocol.clock import ChunkTiming

if TYPE_CHECKING:
    from pytest_libero.episode.setup import Setup

CHILD_OUTPUT = "simulator.log"


class Heartbeat:
    """An episode listener and phase reporter writing to the host's pipe."""

    def __init__(self, conn: Connection) -> None:
        self.conn = conn
        self.counters: dict[str, int] = {"policy_calls": 0, "executed_controls": 0}

    def phase(self, name: Phase) -> None:
        self.conn.send(Progress(name, dict(self.counters)))

    def on_observation(self, call: int, observation: Observation) -> None:
        self.counters["policy_calls"] = call - 1
        self.phase(Phase.POLICY)

    def on_decision(self, call: int, reply: Reply) -> None:
        self.counters["policy_calls"] = call
        self.phase(Phase.STEP)

    def on_reply(self, call: int, reply: Reply, timing: ChunkTiming) -> None:
        pass

    def on_control(self, control: int, action: np.ndarray, frame: Callable[[], np.ndarray],
                   call: int | None = None) -> None:
        self.counters["executed_controls"] = control
        self.phase(Phase.STEP)


def run_child(conn: Connection, sys_path: list[str]) -> None:
    """Entry point of the case process: serve the host's messages until :class:`Stop`
    (or until the host is gone)."""
    sys.path[:] = sys_path
    from pytest_libero.episode.case import run_case_with_evidence
    from pytest_libero.episode.setup import open_episode

    adapters = AdapterCache()
    prepared: tuple[Prepare, Setup] | None = None
    while not isinstance(job := _next_job(conn), Stop):
        heartbeat = Heartbeat(conn)
        if isinstance(job, Prepare):
            capture_output(job.log)
            heartbeat.phase(Phase.BUILD)
            prepared = (job, open_episode(job.plan, job.entry, adapters, job.placement))
            conn.send(Prepared(job.entry.case_id))
            continue
        setup: Setup | None = None
        early_log: Path | None = None
        if isinstance(job, Go):
            if prepared is None or prepared[0].entry.case_id != job.case_id:
                raise RuntimeError(f"told to run {job.case_id}, but this process set up "
                                   f"{prepared[0].entry.case_id if prepared else 'nothing'}")
            ahead, setup = prepared
            plan, entry, placement, early_log = ahead.plan, ahead.entry, ahead.placement, ahead.log
        else:
            plan, entry, placement = job.plan, job.entry, job.placement
        prepared = None
        capture_output(job.case_dir / CHILD_OUTPUT, moved_from=early_log)
        heartbeat.phase(Phase.START)
        policy = plan.profile.build_policy()
        try:
            record = run_case_with_evidence(plan, entry, policy, job.case_dir, listener=heartbeat,
                                            phase=heartbeat.phase, adapters=adapters,
                                            setup=setup, turn=job.turn, placement=placement)
        finally:
            policy.close()
        conn.send(Finished(record))
    conn.close()
    # Skip interpreter teardown: the EGL context's exit-time noise stays out of the log.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _next_job(conn: Connection) -> ToChild:
    try:
        job: ToChild = conn.recv()
    except EOFError:  # the worker is gone
        return Stop()
    return job


def capture_output(log: Path, moved_from: Path | None = None) -> None:
    """Send this process's stdout and stderr to ``log``, after what ``moved_from`` (the
    log of a set-up done ahead) holds."""
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    if moved_from is not None:
        move_log(moved_from, fd)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)


def move_log(source: Path, fd: int) -> None:
    """Append ``source`` to the open file ``fd`` and remove it (gone already: nothing)."""
    with suppress(FileNotFoundError):
        os.write(fd, source.read_bytes())
        source.unlink()
