"""``pytest-libero`` commands as the tests run them: in this process (fast, and what a
traceback would show is kept as the user would see it), or in a process of their own
with a timeout, optionally as root without its capabilities.
"""

from __future__ import annotations

import io
import os
import subprocess
import sys
import traceback
from collections.abc import Sequence
from contextlib import redirect_stderr, redirect_stdout

from pytest_libero import cli

Said = tuple[int, str, str]
"""A command's exit code, stdout and stderr."""

UNPRIVILEGED = ["setpriv", "--bounding-set=-all", "--inh-caps=-all"] if os.geteuid() == 0 else []
"""Root without its capabilities: file permissions bind it as they bind any user."""


def in_process(args: Sequence[str]) -> Said:
    """``pytest-libero ARGS`` in this process; an uncaught exception is written to stderr
    as the traceback a user would see, exit code 1."""
    out, err = io.StringIO(), io.StringIO()
    with redirect_stdout(out), redirect_stderr(err):
        try:
            code = cli.main(list(args))
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 1
        except Exception:
            err.write(traceback.format_exc())
            code = 1
    return code, out.getvalue(), err.getvalue()


def own_process(args: Sequence[str], *, unprivileged: bool = False, timeout: float = 120) -> Said:
    """``pytest-libero ARGS`` in a process of its own: a command that blocks fails the
    test at ``timeout`` instead of hanging it."""
    done = subprocess.run([*(UNPRIVILEGED if unprivileged else []), sys.executable, "-m",
                           "pytest_libero.cli", *args],
                          capture_output=True, text=True, timeout=timeout)
    return done.returncode, done.stdout, done.stderr
