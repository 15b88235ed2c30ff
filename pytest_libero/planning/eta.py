"""How long a running run has left: the plan's cost model, fed the run's own finished cases.

Before the first case completes there is nothing of this run to go on and no estimate is
given. After it, the phase costs and assumptions come from the completed cases' records
(as ``pytest-libero plan --from`` reads a finished run), the cases not finished yet are
handed out over the run's workers, and the cases running now are credited with the time
they have run. Those costs were measured under this run's own load, so only the workers'
bound applies (:func:`~pytest_libero.planning.model.predict`, ``shared=False``). A run that
decides early may stop sooner: the estimate is for every case.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace

from pytest_libero.config.plan import RunPlan
from pytest_libero.episode.record import CaseRecord
from pytest_libero.planning.figures import HOUR, LONGEST_S
from pytest_libero.planning.model import CaseShape, predict
from pytest_libero.planning.shapes import Tally, case_shapes


class Remaining:
    """The seconds a run has left; told which cases start and finish, and when."""

    def __init__(self, shapes: Sequence[CaseShape], workers: int, prebuild: bool) -> None:
        self.shapes = tuple(shapes)
        self.cases = frozenset(s.case for s in self.shapes)
        self.workers = max(workers, 1)
        self.prebuild = prebuild
        self.tally = Tally()
        self.finished: set[str] = set()
        self.running: dict[str, float] = {}
        """Each running case's start, in the caller's clock."""
        self.unfinished_s: float | None = None
        """The unfinished cases' predicted wall time, as of the last finished case."""

    @classmethod
    def for_plan(cls, plan: RunPlan, order: Sequence[str] | None, workers: int,
                 prebuild: bool) -> Remaining:
        """The plan's cases in the order the run hands them out."""
        return cls(case_shapes(plan, order), workers, prebuild)

    def start(self, case: str, at: float) -> None:
        if case in self.cases and case not in self.finished:
            self.running[case] = at

    def finish(self, case: str, record: CaseRecord | None) -> None:
        """A case's end (``record``: what it recorded, None when it ran no episode)."""
        if case not in self.cases:
            return
        self.running.pop(case, None)
        self.finished.add(case)
        if record is not None:
            self.tally.add(record)
        try:
            costs, assume = self.tally.costs("this run")
        except ValueError:
            return  # nothing completed yet
        rest = [s for s in self.shapes if s.case not in self.finished]
        assume = replace(assume, prebuild=self.prebuild)
        self.unfinished_s = predict(rest, costs, assume, self.workers, self.workers,
                                    shared=False).wall_s

    def seconds_left(self, now: float) -> float | None:
        """None until a case completed; the running cases' mean time so far is taken off."""
        if self.unfinished_s is None:
            return None
        # One C-level copy: the live line's thread reads while the hooks' thread writes.
        elapsed = [now - at for at in tuple(self.running.values())]
        ran = sum(elapsed) / len(elapsed) if elapsed else 0.0
        return max(self.unfinished_s - ran, 0.0)

    @property
    def counts(self) -> tuple[int, int]:
        """Cases finished, of all."""
        return len(self.finished), len(self.cases)


def duration_text(seconds: float) -> str:
    """``45s``, ``3m20s``, ``1h05m``; past :data:`LONGEST_S` (or not a number), never
    spelled out in full."""
    if not 0 <= seconds <= LONGEST_S:
        return f"over {LONGEST_S / HOUR:.0f}h" if seconds > 0 else "?"
    whole = round(seconds)
    if whole < 60:
        return f"{whole}s"
    if whole < 3600:
        return f"{whole // 60}m{whole % 60:02d}s"
    return f"{whole // 3600}h{whole % 3600 // 60:02d}m"


def eta_text(remaining: Remaining, now: float, *, short: bool = False) -> str:
    """``3 of 10 done, about 4m10s left`` (short: ``3/10, ~4m10s left``); only the count
    before an estimate exists."""
    done, total = remaining.counts
    left = remaining.seconds_left(now)
    counted = f"{done}/{total}" if short else f"{done} of {total} done"
    if left is None or done == total:
        return counted
    return f"{counted}, {'~' if short else 'about '}{duration_text(left)} left"
