"""Start a profile's policy server for the session, wait for health, stop it after.

The server's output goes to ``server.log`` in the run folder, so a model that failed
to load leaves its reason next to the results. The process gets its own session so
that stopping it also stops whatever it spawned.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from pytest_libero.files import tail_of
from pytest_libero.policy.errors import ServerUnavailable
from pytest_libero.policy.openpi.probe import wait_for_health
from pytest_libero.protocol.errors import SetupError

STOP_GRACE_S = 10.0


@dataclass(frozen=True)
class Launch:
    """How the plugin starts the model's server itself, and how long it waits."""

    command: tuple[str, ...]
    cwd: str
    env: Mapping[str, str]
    startup_timeout: float

    def argv(self, endpoint: str) -> list[str]:
        """The command with {host} and {port} filled from the endpoint."""
        parts = urlsplit(endpoint)
        fields = {"host": parts.hostname or "127.0.0.1", "port": str(parts.port or 8000)}
        return [arg.format(**fields) for arg in self.command]


class LaunchedServer:
    """A policy server process owned by this pytest session."""

    def __init__(self, launch: Launch, endpoint: str, log_path: Path) -> None:
        self.launch = launch
        self.endpoint = endpoint
        self.log_path = log_path
        self.argv = launch.argv(endpoint)
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        """Start the server and return once GET /healthz answers 200."""
        with self.log_path.open("ab") as log:
            try:
                self.process = subprocess.Popen(
                    self.argv,
                    cwd=self.launch.cwd,
                    env={**os.environ, **self.launch.env},
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                )
            except OSError as exc:
                raise SetupError(f"could not start the policy server {self.argv}: {exc}") from exc
        try:
            wait_for_health(
                self.endpoint,
                time.monotonic() + self.launch.startup_timeout,
                timeout=2.0,
                still_worth_it=self._still_running,
            )
        except ServerUnavailable:
            self.stop()
            raise SetupError(
                f"the policy server {self.argv} was not healthy at {self.endpoint} "
                f"after {self.launch.startup_timeout:.0f}s (launch.startup_timeout); "
                f"its output ends with:\n{tail_of(self.log_path, 20)}"
            ) from None

    def _still_running(self) -> None:
        assert self.process is not None
        code = self.process.poll()
        if code is not None:
            raise SetupError(
                f"the policy server {self.argv} exited with code {code} before it was "
                f"healthy; its output ({self.log_path}) ends with:\n{tail_of(self.log_path, 20)}"
            )

    def stop(self) -> None:
        """SIGTERM the server's process group, then SIGKILL after a grace period."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            _signal_group(process.pid, signal.SIGTERM)
            try:
                process.wait(STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                _signal_group(process.pid, signal.SIGKILL)
                process.wait()


def _signal_group(pid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pid, sig)
    except ProcessLookupError:
        pass
