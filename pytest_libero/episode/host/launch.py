"""Starting a case process: forked from the worker's forkserver, with the simulator loaded.

The forkserver imports the simulator once and compiles the worker's first scene
without rendering (``pytest_libero.episode.preload``), so a case process starts with
robosuite, LIBERO and MuJoCo loaded and MuJoCo's asset cache holding the robot's, the
arena's and that scene's meshes and textures. The host takes any :class:`Launcher`;
its tests hand it one that starts a scripted child instead.
"""

from __future__ import annotations

import multiprocessing
import os
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from multiprocessing.connection import Connection
from multiprocessing.context import ForkServerContext
from multiprocessing.process import BaseProcess
from typing import Protocol

from pytest_libero.catalog.entries import Entry
from pytest_libero.protocol.errors import SetupError

PRELOAD = ["__main__", "pytest_libero.episode.preload"]
"""What each worker's forkserver imports before it forks case processes: the worker's
main script (else every case process runs it again, e.g. the ``pytest`` console
script), then the simulator and the case's own modules."""
SOCKET_PATH_BYTES = 107
"""The longest path an AF_UNIX socket is bound to on Linux (108 bytes with the NUL)."""
SOCKET_SUFFIX_BYTES = len("/pymp-12345678/listener-12345678")
"""What multiprocessing appends to the temporary folder for the forkserver's socket."""
WARM_SCENE = "PYTEST_LIBERO_WARM_SCENE"
"""The entry (BDDL and init-state file names) whose scene the forkserver compiles once."""


class Launcher(Protocol):
    """Starts one case process for ``entry`` and returns it with the host's end of its
    pipe. Raises whatever stopped it (no fork, a dead forkserver, no descriptors)."""

    def __call__(self, entry: Entry) -> tuple[BaseProcess, Connection]: ...


def socket_folder_problem() -> str | None:
    """Why no forkserver can start here (its socket's path would be too long), or None."""
    temporary = tempfile.gettempdir()
    if len(os.fsencode(temporary)) + SOCKET_SUFFIX_BYTES <= SOCKET_PATH_BYTES:
        return None
    return (f"the temporary folder {temporary} is {len(os.fsencode(temporary))} bytes long: "
            "case processes start from a forkserver whose socket lives in it, and a socket "
            f"path holds at most {SOCKET_PATH_BYTES} bytes; set TMPDIR to a folder at most "
            f"{SOCKET_PATH_BYTES - SOCKET_SUFFIX_BYTES} bytes long (e.g. /tmp)")


@contextmanager
def case_forkserver(entry: Entry | None) -> Iterator[ForkServerContext]:
    """The forkserver context case processes start from; if this start launches the
    server, it compiles ``entry``'s scene first (the worker's first case)."""
    problem = socket_folder_problem()
    if problem is not None:
        raise SetupError(problem)
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(PRELOAD)
    if entry is not None:  # read only by a start that launches the server
        os.environ[WARM_SCENE] = os.pathsep.join((entry.bddl_file, entry.init_states_file))
    try:
        yield context
    finally:
        os.environ.pop(WARM_SCENE, None)


def forkserver_launcher(entry: Entry) -> tuple[BaseProcess, Connection]:
    """A case process running :func:`~.child.run_child`, forked from the forkserver."""
    from pytest_libero.episode.host.child import run_child

    with case_forkserver(entry) as context:
        parent_conn, child_conn = context.Pipe(duplex=True)
        process = context.Process(target=run_child, args=(child_conn, list(sys.path)),
                                  daemon=True)
        try:
            process.start()
        except BaseException:
            parent_conn.close()
            raise
        finally:
            child_conn.close()
    return process, parent_conn
