"""The hooks pytest-libero calls, for any plugin to implement: a lab's dashboard, a notifier.

pytest-libero adds them to pytest's own (``plugin.pytest_addhooks``, as pytest-xdist adds
its ``newhooks``). All of them are called on the controller, the process that owns the run
folder: without xdist that is the one pytest process; under xdist the records come from
the workers inside their test reports and are read there, once
(``results.feed.CaseFeed``). pytest-libero's own readers of a run are implementations of
these hooks too: the ETA clock and the finished lines (``report.progress``), the decision
of ``--libero-decide`` (``results.decider.Decider``), the Allure environment panel and the
experiment trackers.

For each case of the run, in the order the cases end: ``pytest_libero_case_started`` when
it begins, then, once it has a record, ``pytest_libero_case_recorded``, then
``pytest_libero_case_finished``. No implementation depends on another's order within one
hook: what takes a record in listens to ``..._recorded``; what reports on what the others
took in (the finished line, which shows the clock's estimate) listens to ``..._finished``,
which is called after every implementation of ``..._recorded`` has returned.

A plugin that may also be loaded without pytest-libero marks its implementations
``@pytest.hookimpl(optionalhook=True)``; an implementation takes any subset of a hook's
arguments, by name. docs/architecture.md ("Listening to a run") has an example.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

if TYPE_CHECKING:
    from pytest_libero.episode.record import CaseRecord


@pytest.hookspec
def pytest_libero_case_started(case: str, nodeid: str) -> None:
    """A case of this run has begun (its item's ``pytest_runtest_logstart``; under xdist, as
    its worker says so): ``case`` is its case id (``libero_10-03``), ``nodeid`` its test."""


@pytest.hookspec
def pytest_libero_case_recorded(record: CaseRecord, report: pytest.TestReport) -> None:
    """A case's record, read once from its teardown report into the typed record
    (docs/records.md), already appended to results.jsonl.

    ``report`` is that teardown report. Called once per case that ran an episode (an
    errored episode has a record too); the record is shared by every implementation: do
    not change it."""


@pytest.hookspec
def pytest_libero_case_finished(case: str, record: CaseRecord | None, report: pytest.TestReport,
                                duration: float) -> None:
    """A case of this run has ended, after every ``pytest_libero_case_recorded``
    implementation took its record in.

    ``record`` is None when the case ran no episode (left unattempted, skipped once the
    run was decided, or an error before its episode); ``duration`` the seconds pytest
    timed for its setup, call and teardown together."""


@pytest.hookspec
def pytest_libero_run_finished(session: pytest.Session, run_dir: Path, summary: dict[str, Any]) -> None:
    """The session's end: the run's summary.json is written (the gates evaluated, the exit
    code set) and results.jsonl is closed. ``summary`` is what summary.json holds (unless
    writing it failed: its ``write_errors`` say so); do not change it."""
