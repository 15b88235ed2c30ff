"""Trackers at a run's end (issue 49, classes H9 and H10): a tracker that accepts a
connection and never answers costs a live run at most the stated wait, said while it
waits; ``pytest-libero log`` checks a W&B project name and an MLflow URI by the rules
``--libero-wandb`` and ``--libero-mlflow`` apply, naming the value once.

The live run is real (the plugin with the scripted adapter, tests/decide_adapter.py); the
silent tracker is a TCP server on 127.0.0.1 that accepts and never replies, MLflow's real
client talking to it (mlflow-skinny, the test extra).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from cli_runs import in_process
from decided_runs import run
from scripted_runs import make_run

from harness.hostile import Hostile
from pytest_libero.config.options import TRACKER_WAIT_VARIABLE
from pytest_libero.protocol.text import echo


@pytest.fixture
def silent_server() -> Iterator[str]:
    """An HTTP address whose server accepts every connection and never answers."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    held: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                held.append(listener.accept()[0])
            except OSError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{listener.getsockname()[1]}"
    finally:
        stop.set()
        thread.join(5)
        for connection in held:
            connection.close()
        listener.close()


def test_a_tracker_that_never_answers_costs_at_most_the_stated_wait(
        silent_server: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TRACKER_WAIT_VARIABLE, "3")
    started = time.monotonic()
    done = run(tmp_path, "--libero-task-ids=0", f"--libero-mlflow={silent_server}")
    took = time.monotonic() - started
    assert done.returncode == 1, done.stdout + done.stderr  # the zero policy's own verdict
    assert (f"pytest-libero: logging the run to MLflow (waiting at most 3 s; {TRACKER_WAIT_VARIABLE} "
            "sets it) ...") in done.stderr, done.stderr
    assert (f"pytest-libero: could not log the run to MLflow {silent_server!r}: no answer within 3 s "
            f"({TRACKER_WAIT_VARIABLE} sets the wait); try again later with: pytest-libero log ") \
        in done.stdout, done.stdout
    assert took < 45, f"{took:.0f} s: MLflow's own retries alone take about 97 s"
    assert (tmp_path / "libero-results").is_dir()


@pytest.mark.parametrize("value", ["0", "-5", "soon", "nan", "inf"])
def test_a_wait_that_is_not_seconds_is_a_usage_error(
        value: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(TRACKER_WAIT_VARIABLE, value)
    done = run(tmp_path, "--libero-task-ids=0", "--libero-mlflow=http://127.0.0.1:9")
    assert done.returncode == 4, done.stdout + done.stderr
    assert f"{TRACKER_WAIT_VARIABLE}={value!r} is not a number of seconds above 0" in done.stderr
    assert not (tmp_path / "libero-results").exists()


LONG = "p" * 300
LOG_ROWS = [
    ("wandb-long", ["--wandb", LONG], f"--wandb={echo(LONG)} is longer than W&B takes (128 characters); "
     "give a W&B project name"),
    ("wandb-slash", ["--wandb", "team/project"], "--wandb='team/project' holds '/', which W&B refuses in "
     "a project name; give a W&B project name"),
    ("mlflow-long-part", ["--mlflow", f"http://127.0.0.1:5000/{'x' * 300}"],
     "a part of it is longer than 255 bytes; give a tracking URI"),
]


@pytest.mark.parametrize(("args", "said"), [
    pytest.param(args, said, id=row_id) for row_id, args, said in LOG_ROWS])
def test_log_checks_a_tracker_name_as_the_run_option_does(
        args: list[str], said: str, tmp_path: Path) -> None:
    folder, _ = make_run(tmp_path)
    code, out, err = in_process(["log", str(folder), *args])
    lines = [line for line in err.splitlines() if line.strip()]
    assert (code, out, len(lines)) == (2, "", 1), (code, out, err)
    assert lines[0].startswith("pytest-libero log: ") and said in lines[0], lines[0]
    assert lines[0].count("--wandb=") + lines[0].count("--mlflow=") <= 1 and len(lines[0]) < 250, lines[0]
    assert not any(name in os.listdir(tmp_path) for name in ("wandb", "mlruns"))


HOSTILE: list[Hostile] = [
    Hostile(9, "a live run with `--libero-mlflow` at a server that accepts and never answers "
            "(the run's end waited about 97 s)",
            f"while waiting: \"pytest-libero: logging the run to MLflow (waiting at most N s; "
            f"{TRACKER_WAIT_VARIABLE} sets it) ...\"; then \"could not log the run to MLflow '...': "
            "no answer within N s ...; try again later with: pytest-libero log ...\"; the exit code "
            "is the run's own (default wait 120 s)",
            "tests/test_hostile_trackers.py::test_a_tracker_that_never_answers_costs_at_most_the_stated_wait"),
    Hostile(9, f"`{TRACKER_WAIT_VARIABLE}` of 0, -5, soon, nan or inf",
            f"exit 4 before any case: \"{TRACKER_WAIT_VARIABLE}='soon' is not a number of seconds above "
            "0; unset it for the default (120 s)\"",
            "tests/test_hostile_trackers.py::test_a_wait_that_is_not_seconds_is_a_usage_error"),
    *(Hostile(10, f"`pytest-libero log RUN {' '.join(a if len(a) < 40 else a[:30] + '…' for a in args)}`",
              f"exit 2, one line, the value quoted once: \"pytest-libero log: {said}\"",
              f"tests/test_hostile_trackers.py::test_log_checks_a_tracker_name_as_the_run_option_does[{row_id}]")
      for row_id, args, said in LOG_ROWS),
]
