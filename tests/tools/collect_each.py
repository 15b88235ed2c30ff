"""Collect many pytest command lines fast, each in a process of its own.

A fresh ``pytest --collect-only`` spends about two seconds importing and warming up
before it reads its first option, a collection after that a fraction of a second. This
process collects the zero profile once (imports done, caches filled), then forks one
child per command: each child chdirs to its folder, sets its environment and runs
``pytest.main`` with the command's arguments, so no command sees another's state.

Reads a JSON list of ``{"args": [...], "cwd": "...", "env": {...}}`` on stdin; writes
one JSON list of ``{"code": N, "stdout": "...", "stderr": "..."}`` in the same order.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import sys
import tempfile
from typing import Any

import pytest


def collect(job: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        pid = os.fork()
        if pid == 0:  # the child: never returns
            code = 70
            try:
                os.chdir(job["cwd"])
                os.environ.update(job["env"])
                os.dup2(out.fileno(), 1)
                os.dup2(err.fileno(), 2)
                sys.stdout = open(1, "w", closefd=False)  # noqa: SIM115
                sys.stderr = open(2, "w", closefd=False)  # noqa: SIM115
                code = int(pytest.main(list(job["args"])))
            finally:
                sys.stdout.flush()
                sys.stderr.flush()
                os._exit(code)
        _, status = os.waitpid(pid, 0)
        out.seek(0)
        err.seek(0)
        return {"code": os.waitstatus_to_exitcode(status), "stdout": out.read(), "stderr": err.read()}


def main() -> None:
    jobs = json.load(sys.stdin)
    here = os.getcwd()
    with tempfile.TemporaryDirectory() as scratch, contextlib.redirect_stdout(io.StringIO()):
        os.chdir(scratch)
        pytest.main(["-p", "no:cacheprovider", "--libero-profile=zero", "--collect-only", "-q"])
        os.chdir(here)
    json.dump([collect(job) for job in jobs], sys.stdout)


if __name__ == "__main__":
    main()
