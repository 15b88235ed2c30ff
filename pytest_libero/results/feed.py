"""The controller's one reader of the cases' reports: each record parsed once, kept, then
told to the listeners.

A case's record crosses from the process that ran it to the controller inside its test
report, as one line of JSON in a user property (``episode.record.RECORD_PROPERTY``);
under xdist the workers' reports reach the controller as any report does. :class:`CaseFeed`
is the only code that reads it there. For each case it calls the hooks of
``pytest_libero/hookspecs.py``, in this order and no other:

1. ``pytest_libero_case_started`` when the case's item starts;
2. at its teardown report, the record read into the typed record (checked whole), kept
   by the :class:`Keeper` (the recorder: its line in results.jsonl), and only then
   ``pytest_libero_case_recorded``;
3. ``pytest_libero_case_finished``, with the record or None.

The feed's report hook is ``trylast``: pytest's own reporters have written what they
write for the teardown before any listener writes its line.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import TYPE_CHECKING, Protocol

import pytest

from pytest_libero.episode.record import RECORD_PROPERTY, UNATTEMPTED_PROPERTY, CaseRecord, record_from_json

if TYPE_CHECKING:
    import pluggy


class Keeper(Protocol):
    """Who keeps the records before anyone else hears of them (``Recorder``)."""

    def keep(self, record: CaseRecord) -> None:
        """Keep one case's record (its line in results.jsonl)."""

    def stop(self, why: str) -> None:
        """The run stopped before its last case (a policy server gone): why, and how to
        finish it."""


def case_of(nodeid: str) -> str:
    """The case id in a LIBERO case's node id (``test_libero.py::test_case[libero_10-00]``)."""
    return nodeid[nodeid.rfind("[") + 1:-1] if nodeid.endswith("]") else ""


class CaseFeed:
    """Registered once, on the controller, for a run whose cases are ``cases``."""

    def __init__(self, hook: pluggy.HookRelay, cases: Iterable[str], keeper: Keeper | None = None) -> None:
        self.hook = hook
        self.cases = frozenset(cases)
        self.keeper = keeper
        self.durations: dict[str, float] = {}

    def pytest_runtest_logstart(self, nodeid: str) -> None:
        case = case_of(nodeid)
        if case in self.cases:
            self.hook.pytest_libero_case_started(case=case, nodeid=nodeid)

    @pytest.hookimpl(trylast=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.durations[report.nodeid] = self.durations.get(report.nodeid, 0.0) + report.duration
        if report.when != "teardown":
            return
        duration = self.durations.pop(report.nodeid)
        record = self.take(report)
        case = record["case"] if record is not None else case_of(report.nodeid)
        if record is not None or case in self.cases:
            self.hook.pytest_libero_case_finished(case=case, record=record, report=report,
                                                  duration=duration)

    def take(self, report: pytest.TestReport) -> CaseRecord | None:
        """The teardown report's record (kept, then told), or None; a case left
        unattempted tells the keeper why the run stopped."""
        record: CaseRecord | None = None
        for name, value in report.user_properties:
            if name == UNATTEMPTED_PROPERTY and self.keeper is not None:
                self.keeper.stop(str(value))
            if name == RECORD_PROPERTY:
                record = record_from_json(json.loads(str(value)))
                record["nodeid"] = report.nodeid
                if self.keeper is not None:
                    self.keeper.keep(record)
                self.hook.pytest_libero_case_recorded(record=record, report=report)
        return record
