"""A policy server in its own process for one test or measurement: started, waited for,
always stopped.

Every caller gets the same life cycle: the output goes to a log file (so a server that
exits early says why), the wait polls ``GET /healthz`` and gives up at once if the
process is gone, and the stop is SIGTERM, a grace period, then SIGKILL.
"""

from __future__ import annotations

import contextlib
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def serve_argv(policy: str, port: int, *, options: Sequence[str] = (), flags: Sequence[str] = (),
               python: str = sys.executable) -> list[str]:
    """``python -m pytest_libero.serve`` for ``policy``; each option as ``--option KEY=VALUE``."""
    argv = [python, "-m", "pytest_libero.serve", "--policy", policy, "--port", str(port)]
    for option in options:
        argv += ["--option", option]
    return [*argv, *flags]


VLA_EVAL_SERVER = Path(__file__).resolve().parents[1] / "tests" / "vla_eval_server.py"
"""vla-eval's own model server around a small numpy predict (needs vla-eval installed)."""


def vla_eval_argv(port: int, *flags: str, python: str = sys.executable) -> list[str]:
    """The probe vla-eval server on 127.0.0.1:``port``; ``flags`` are its ``--args.*``."""
    return [python, str(VLA_EVAL_SERVER), "--address", f"127.0.0.1:{port}", *flags]


class ServerDidNotStart(RuntimeError):
    """The server exited, or never answered its health check in time; says which, with
    the tail of its output."""


@dataclass(frozen=True)
class Served:
    uri: str
    process: subprocess.Popen[bytes]
    log: Path

    def output(self, last: int = 5000) -> str:
        """The tail of what the server printed so far."""
        try:
            return self.log.read_text(errors="replace")[-last:]
        except OSError:
            return ""


@contextlib.contextmanager
def serving(argv: Sequence[str], port: int, *, env: Mapping[str, str] | None = None,
            wait_s: float | None = 60.0, poll_s: float = 1.0, grace_s: float = 10.0,
            log: Path | None = None, cwd: Path | None = None,
            health_path: str = "/healthz") -> Iterator[Served]:
    """Start ``argv`` (a server that will listen on ``port``), wait up to ``wait_s`` for
    its health check (GET ``health_path``), yield it, and stop it however the block ends.

    ``wait_s=None`` yields at once: for a caller whose client does its own waiting.
    ``log``: where its output goes (a temporary file, removed afterwards, by default).
    """
    from pytest_libero.policy.openpi.probe import wait_for_health

    own_log = log is None
    path = Path(tempfile.mkstemp(prefix="served-", suffix=".log")[1]) if log is None else log
    try:
        with path.open("wb") as output:
            process = subprocess.Popen(list(argv), stdout=output, stderr=subprocess.STDOUT,
                                       env=None if env is None else dict(env), cwd=cwd)
    except OSError:
        if own_log:
            path.unlink(missing_ok=True)
        raise
    served = Served(f"ws://127.0.0.1:{port}", process, path)

    def still_running() -> None:
        if process.poll() is not None:
            raise ServerDidNotStart(f"{argv[0]} ... exited with {process.returncode} before it "
                                    f"served {served.uri}:\n{served.output()}")

    try:
        if wait_s is not None:
            try:
                wait_for_health(served.uri, time.monotonic() + wait_s, poll_s,
                                still_worth_it=still_running, path=health_path)
            except ServerDidNotStart:
                raise
            except Exception as exc:  # ServerUnavailable (its module may move): no answer in time
                raise ServerDidNotStart(f"nothing answered at {served.uri} within {wait_s} s "
                                        f"({exc}); its output:\n{served.output()}") from exc
        yield served
    finally:
        stop(process, grace_s)
        if own_log:
            path.unlink(missing_ok=True)


def stop(process: subprocess.Popen[bytes], grace_s: float = 10.0) -> None:
    """SIGTERM, then SIGKILL if it outlives ``grace_s``; always reaped."""
    if process.poll() is None:
        process.terminate()
        try:
            process.wait(grace_s)
            return
        except subprocess.TimeoutExpired:
            process.kill()
    process.wait()
