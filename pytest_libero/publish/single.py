"""One run's table: per suite and overall, its success rate with the 95% Wilson interval
and, where the records have them, the mean partial-credit score with its interval.

Computed from the records (``results.run_reader``), as summary.json is: a rate is over
completed cases, errored ones are counted apart, cases the run did not reach are
counted as not run.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pytest_libero.episode.record import CaseRecord
from pytest_libero.publish.comparison import OVERALL, Rate
from pytest_libero.results.rates import COMPLETED
from pytest_libero.results.robustness import suite_key
from pytest_libero.results.run_reader import RunRead
from pytest_libero.results.scores import score_object


@dataclass(frozen=True)
class Score:
    scored: int
    mean: float
    low: float
    high: float


@dataclass(frozen=True)
class RunRow:
    group: str
    cases: int
    errored: int
    rate: Rate
    score: Score | None


@dataclass(frozen=True)
class RunTable:
    label: str
    selected: int
    not_run: int
    rows: tuple[RunRow, ...]
    """The suites', then the overall row when there is more than one suite."""


def run_row(group: str, records: Sequence[CaseRecord]) -> RunRow:
    completed = [r for r in records if r["outcome"] in COMPLETED]
    rate = Rate.of_counts(sum(r["outcome"] == "success" for r in completed), len(completed))
    found = score_object(records)
    score = (Score(found["scored"], found["mean"], *found["interval95"])
             if found["scored"] else None)
    return RunRow(group, len(records), len(records) - len(completed), rate, score)


def run_table(read: RunRead, label: str) -> RunTable:
    selected: list[str] = list(read.run["plan"]["selection_cases"])
    chosen = set(selected)
    records = [r for r in read.records if r["case"] in chosen]
    groups = sorted({suite_key(r) for r in records})
    rows = [run_row(g, [r for r in records if suite_key(r) == g]) for g in groups]
    if len(rows) != 1:
        rows.append(run_row(OVERALL, records))
    return RunTable(label, len(selected), len(selected) - len(records), tuple(rows))
