"""Logging a finished run to the experiment trackers asked for, never failing the run.

The same work for a live session (``--libero-wandb``, ``--libero-mlflow``: the
:class:`TrackerLog` plugin, once, on the controller, when the recorder has written
summary.json: ``pytest_libero_run_finished``) and for ``pytest-libero log RUN_DIR``. A
tracker that is not installed, cannot be reached or refuses the run costs one line of
warning; the evaluation's result and exit code never depend on it.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from pytest_libero import children
from pytest_libero.config.options import TRACKER_WAIT_VARIABLE
from pytest_libero.config.settings import Trackers
from pytest_libero.export.tracked import TrackedRun, tracked_run
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.text import clipped


@dataclass(frozen=True)
class Tracker:
    """One tracker: its name, the package its client needs, and how to log to it."""

    name: str
    package: str
    extra: str
    flag: str
    """The ``pytest-libero log`` flag that names it."""
    log: Callable[[str, TrackedRun], str]


def _wandb(target: str, run: TrackedRun) -> str:
    from pytest_libero.export.sinks import log_wandb

    return log_wandb(target, run)


def _mlflow(target: str, run: TrackedRun) -> str:
    from pytest_libero.export.sinks import log_mlflow

    return log_mlflow(target, run)


TRACKERS = {"wandb": Tracker("W&B", "wandb", "wandb", "--wandb", _wandb),
            "mlflow": Tracker("MLflow", "mlflow", "mlflow", "--mlflow", _mlflow)}


@dataclass(frozen=True)
class Logged:
    """What logging to one tracker came to: one line, and whether it worked."""

    ok: bool
    line: str


def asked(trackers: Trackers) -> dict[str, str]:
    """Tracker key -> its target (W&B project, MLflow URI), for those asked for."""
    targets = {"wandb": trackers.wandb, "mlflow": trackers.mlflow}
    return {name: target for name, target in targets.items() if target}


def missing(name: str) -> Logged | None:
    """The warning for a tracker whose client is not installed (found without importing it)."""
    tracker = TRACKERS[name]
    if importlib.util.find_spec(tracker.package) is not None:
        return None
    return Logged(False, f"pytest-libero: logging to {tracker.name} needs {tracker.package}: "
                         f"pip install 'pytest-libero[{tracker.extra}]'; the run is not logged there")


def log_run(run_dir: Path, targets: dict[str, str]) -> list[Logged]:
    """Log ``run_dir`` to each tracker in ``targets``; one Logged each. Raises SetupError
    when the run folder itself cannot be read."""
    results = []
    run: TrackedRun | None = None
    for name, target in targets.items():
        absent = missing(name)
        if absent is not None:
            results.append(absent)
            continue
        run = run or tracked_run(run_dir)
        tracker = TRACKERS[name]
        try:
            results.append(Logged(True, f"pytest-libero: {tracker.log(target, run)}"))
        except Exception as exc:  # noqa: BLE001 - a tracker never fails the evaluation
            text = " ".join(str(exc).split()) or "no message"
            results.append(Logged(False, f"pytest-libero: could not log the run to {tracker.name} "
                                  f"{target!r} ({type(exc).__name__}: {clipped(text, 300)}); "
                                  f"try again later with: pytest-libero log {run_dir} "
                                  f"{tracker.flag} {target}"))
    return results


def log_run_within(run_dir: Path, targets: dict[str, str], wait_s: float) -> list[Logged]:
    """:func:`log_run` in a process of its own, stopped after ``wait_s`` seconds: a
    tracker that accepts a connection and never answers costs a live run at most that
    (its client's own retries are not bounded by anything of ours)."""
    answer = children.call(_log_child, str(run_dir), targets, timeout_s=wait_s)
    if isinstance(answer, children.Returned):
        return [Logged(ok, line) for ok, line in answer.value]
    names = " and ".join(f"{TRACKERS[name].name} {target!r}" for name, target in targets.items())
    retry = " ".join(f"{TRACKERS[name].flag} {target}" for name, target in targets.items())
    if isinstance(answer, children.TimedOut):
        why = f"no answer within {wait_s:g} s ({TRACKER_WAIT_VARIABLE} sets the wait)"
    elif isinstance(answer, children.Died):
        why = f"the logging process died (exit code {answer.exitcode})"
    else:
        why = f"the logging process failed ({answer.kind}: {clipped(' '.join(answer.message.split()), 300)})"
    return [Logged(False, f"pytest-libero: could not log the run to {names}: {why}; try again "
                          f"later with: pytest-libero log {run_dir} {retry}")]


def _log_child(run_dir: str, targets: dict[str, str]) -> list[tuple[bool, str]]:
    """The logging process's work: each tracker's (ok, line)."""
    try:
        return [(logged.ok, logged.line) for logged in log_run(Path(run_dir), targets)]
    except SetupError as exc:
        return [(False, f"pytest-libero: the run was not logged to a tracker: {exc}")]


class TrackerLog:
    """The live session's logging, once, on the controller, when the run is finished
    (``pytest_libero_run_finished``: summary.json is there). It waits for the trackers at
    most ``trackers.wait_s``, and says so while it waits."""

    def __init__(self, run_dir: Path, trackers: Trackers) -> None:
        self.run_dir = run_dir
        self.wait_s = trackers.wait_s
        self.targets = asked(trackers)
        for name in list(self.targets):
            absent = missing(name)
            if absent is not None:  # said at once, before the run, and not again
                sys.stderr.write(absent.line + "\n")
                del self.targets[name]
        self.lines: list[str] = []

    def pytest_libero_run_finished(self) -> None:
        if not self.targets:
            return
        names = " and ".join(TRACKERS[name].name for name in self.targets)
        sys.stderr.write(f"pytest-libero: logging the run to {names} (waiting at most "
                         f"{self.wait_s:g} s; {TRACKER_WAIT_VARIABLE} sets it) ...\n")
        sys.stderr.flush()
        try:
            self.lines = [logged.line for logged in log_run_within(self.run_dir, self.targets, self.wait_s)]
        except Exception as exc:  # noqa: BLE001 - never the session's outcome
            self.lines = [f"pytest-libero: the run was not logged to a tracker "
                          f"({type(exc).__name__}: {clipped(str(exc), 300)})"]

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        for line in self.lines:
            terminalreporter.write_line(line)
