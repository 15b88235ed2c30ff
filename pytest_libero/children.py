"""A bounded child process: a function in a new process, or a command, for at most so long.

Two shapes, one rule: the caller gets the child's answer or a typed failure, and the child
never outlives the call.

- :func:`call` runs a function in a new process (spawned, or forked from the forkserver
  the caller gives) and returns :class:`Returned` with its value, or a failure:
  :class:`TimedOut`, :class:`Died` (its exit code, negative for a signal) or
  :class:`Raised` (the exception's type and message). The child is killed on every way
  out, an interrupt of the caller included; with ``group`` it leads a process group of
  its own, and whatever else is in that group is killed with it.
- :func:`run` runs a command (a child pytest) leading its own session, its output in a
  file, and returns :class:`Ran` (its exit code) or :class:`TimedOut` (its group killed).
  An interrupt of the caller (Ctrl-C) is passed on as SIGINT, the command is given
  ``stop_s`` to end (pytest writes its summary), and the interrupt is raised again. On
  every way out, what the command left in its process group (xdist workers, forkservers)
  is waited for ``leftover_s`` and then killed.

The caller words each failure; :func:`clean_environment` is the environment of a child
pytest that must not inherit the calling pytest's options, plugins or worker identity.
This module imports nothing of the package's, so every layer may use it.
"""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import suppress
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext, SpawnContext
from pathlib import Path
from typing import Any, Generic, TypeVar

T = TypeVar("T")

JOIN_S = 10.0
"""How long a child that closed its pipe, or was killed, is waited for (its exit code)."""
STOP_S = 60.0
LEFTOVER_S = 15.0
TICK_S = 0.5
PYTEST_VARIABLES = ("PYTEST_ADDOPTS", "PYTEST_PLUGINS")
"""What a child pytest never inherits, beside every ``PYTEST_XDIST_*``."""


@dataclass(frozen=True)
class Returned(Generic[T]):
    """The function returned ``value``."""

    value: T


@dataclass(frozen=True)
class TimedOut:
    """No answer (no end) within ``seconds``; the child was killed."""

    seconds: float


@dataclass(frozen=True)
class Died:
    """The child ended without an answer: its exit code (negative: the signal's number;
    None: it closed its end and was still running ``JOIN_S`` later, then killed)."""

    exitcode: int | None

    @property
    def signal_name(self) -> str | None:
        """``SIGKILL`` for a child a signal killed, else None."""
        if self.exitcode is None or self.exitcode >= 0:
            return None
        try:
            return signal.Signals(-self.exitcode).name
        except ValueError:
            return f"signal {-self.exitcode}"


@dataclass(frozen=True)
class Raised:
    """The function raised: the exception's type name and its text."""

    kind: str
    message: str

    def __str__(self) -> str:
        return f"{self.kind}: {self.message}"


@dataclass(frozen=True)
class Ran:
    """The command ended by itself, with ``code`` (negative: killed by that signal)."""

    code: int
    seconds: float = field(default=0.0, compare=False)
    """From its start to its own end: without the wait for what it left in its group."""


Failure = TimedOut | Died | Raised


def call(function: Callable[..., T], *args: Any, timeout_s: float | None,
         context: SpawnContext | ForkServerContext | None = None, output: Path | None = None,
         group: bool = False, teardown: bool = True) -> Returned[T] | Failure:
    """``function(*args)`` in a new process of ``context`` (default: spawn; the function,
    its arguments and its value cross by pickle), waiting at most ``timeout_s`` for it
    (None: as long as it takes).

    ``output``: the child's stdout and stderr are appended to this file. ``group``: the
    child leads a process group of its own (a terminal's Ctrl-C no longer reaches it; this
    call still ends it), killed whole at the end. ``teardown=False``: the child leaves at
    once after answering (``os._exit``), skipping what exit handlers and library
    destructors would still do or say. The child is killed on every way out."""
    ctx = context or multiprocessing.get_context("spawn")
    receive, send = ctx.Pipe(duplex=False)
    process = ctx.Process(target=_called, daemon=True,
                          args=(send, function, args, None if output is None else str(output),
                                group, teardown))
    process.start()
    send.close()
    try:
        if timeout_s is not None and not receive.poll(timeout_s):
            return TimedOut(timeout_s)
        answer = receive.recv()
    except (EOFError, OSError):
        process.join(JOIN_S)
        return Died(process.exitcode)
    except Exception as exc:  # noqa: BLE001 - an answer this process cannot unpickle
        return Raised(type(exc).__name__, f"its answer could not be read here: {exc}")
    finally:
        receive.close()
        _end(process, group)
    if answer[0] == "returned":
        return Returned(answer[1])
    return Raised(answer[1], answer[2])


def _called(conn: Connection, function: Callable[..., Any], args: tuple[Any, ...],
            output: str | None, group: bool, teardown: bool) -> None:
    """The child's side of :func:`call`: one answer, ``("returned", value)`` or
    ``("raised", type name, text)``."""
    if group:
        os.setpgid(0, 0)
    if output is not None:
        fd = os.open(output, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        os.close(fd)
    try:
        answer: tuple[Any, ...]
        try:
            answer = ("returned", function(*args))
        except BaseException as exc:  # noqa: BLE001 - every way out of the function is an answer
            answer = ("raised", type(exc).__name__, str(exc))
        try:
            conn.send(answer)
        except Exception as exc:  # noqa: BLE001 - a value that does not pickle
            conn.send(("raised", type(exc).__name__, f"its answer could not be sent back: {exc}"))
    finally:
        conn.close()
        if not teardown:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(0)


def _end(process: Any, group: bool) -> None:
    """Kill ``process`` (with ``group``, its whole process group) if it is still there."""
    if group:
        kill_group(process.pid)
    if process.is_alive():
        process.kill()
    process.join(JOIN_S)


def run(argv: Sequence[str], *, output: Path, timeout_s: float | None = None,
        cwd: Path | None = None, env: Mapping[str, str] | None = None,
        tick: Callable[[], None] | None = None, tick_s: float = TICK_S,
        stop_s: float = STOP_S, leftover_s: float = LEFTOVER_S) -> Ran | TimedOut:
    """``argv`` as the leader of a new session (stdin empty, stdout and stderr to
    ``output``), to its end or for at most ``timeout_s`` (None: no bound), calling
    ``tick`` every ``tick_s`` meanwhile. ``env`` None: this process's environment.

    Past ``timeout_s`` the command's process group is killed: :class:`TimedOut`. An
    exception while it runs (Ctrl-C, or one ``tick`` raises) sends it SIGINT, waits
    ``stop_s`` for it to end (then kills it) and is raised again. Either way, and after a
    normal end, the rest of its process group is waited for up to ``leftover_s`` and then
    killed (:func:`until_gone`)."""
    begun = time.monotonic()
    deadline = None if timeout_s is None else begun + timeout_s
    with output.open("wb") as sink:
        child = subprocess.Popen(list(argv), stdout=sink, stderr=subprocess.STDOUT,
                                 stdin=subprocess.DEVNULL, cwd=cwd,
                                 env=None if env is None else dict(env), start_new_session=True)
        try:
            try:
                while True:
                    left = tick_s if deadline is None else max(min(tick_s, deadline - time.monotonic()), 0.0)
                    try:
                        code = child.wait(left)
                        return Ran(code, time.monotonic() - begun)
                    except subprocess.TimeoutExpired:
                        pass
                    if deadline is not None and time.monotonic() >= deadline:
                        kill_group(child.pid)
                        child.kill()
                        child.wait()
                        return TimedOut(float(timeout_s or 0.0))
                    if tick is not None:
                        tick()
            except BaseException:
                child.send_signal(signal.SIGINT)  # pytest ends the run and writes its summary
                try:
                    child.wait(stop_s)
                except subprocess.TimeoutExpired:
                    child.kill()
                    child.wait()
                raise
        finally:
            until_gone(child.pid, leftover_s)


def clean_environment(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``environ`` (default: this process's) without what would make a child pytest run
    as the calling one does: ``PYTEST_ADDOPTS``, ``PYTEST_PLUGINS``, ``PYTEST_XDIST_*``."""
    found = os.environ if environ is None else environ
    return {key: value for key, value in found.items()
            if key not in PYTEST_VARIABLES and not key.startswith("PYTEST_XDIST")}


def kill_group(group: int) -> None:
    """SIGKILL to every process of ``group``; nothing if there is none."""
    with suppress(ProcessLookupError, PermissionError):
        os.killpg(group, signal.SIGKILL)


def until_gone(group: int, leftover_s: float = LEFTOVER_S) -> None:
    """Wait for the processes of ``group`` (a child that led its own session and the
    processes it left), and kill what is still there after ``leftover_s``: nothing the
    child started outlives the call."""
    deadline = time.monotonic() + leftover_s
    while group_alive(group):
        if time.monotonic() >= deadline:
            kill_group(group)
            return
        time.sleep(0.05)


def group_alive(group: int) -> bool:
    """Whether a process of ``group`` still runs; a zombie does not (where nothing reaps
    orphans, one would otherwise be waited for to the end)."""
    proc = Path("/proc")
    if not proc.is_dir():
        try:
            os.killpg(group, 0)
        except ProcessLookupError:
            return False
        return True
    for stat_file in proc.glob("[0-9]*/stat"):
        try:
            fields = stat_file.read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # gone while being read
        if len(fields) > 2 and fields[2] == str(group) and fields[0] not in ("Z", "X"):
            return True
    return False
