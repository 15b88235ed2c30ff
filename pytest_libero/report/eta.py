"""How long a running run has left: the plan's cost model, fed the run's own finished cases.

Before the first case completes there is nothing of this run to go on and no estimate is
given. After it, the phase costs and assumptions come from the completed cases' records
(as ``pytest-libero plan --from`` reads a finished run), and the time left is the run's
workers played forward: each running case holds its worker for what its cost leaves after
the time it has run, the other workers are free now, and the cases not started yet go in
order to the first worker free (a set-up hidden behind the episode before it on that worker
with ``--libero-prebuild``). Those costs were measured under this run's own load, so no
other bound applies. A run that decides early may stop sooner: the estimate is for every
case.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence
from dataclasses import replace

from pytest_libero.config.plan import RunPlan
from pytest_libero.episode.record import CaseRecord
from pytest_libero.planning.figures import HOUR, LONGEST_S
from pytest_libero.planning.model import CaseCost, CaseShape, case_cost, chains
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
        self.unfinished: dict[str, CaseCost] | None = None
        """Each unfinished case's predicted cost, as of the last finished case."""

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
            costs, assume = self.tally.table("this run")
        except ValueError:
            return  # nothing completed yet
        assume = replace(assume, prebuild=self.prebuild)
        unfinished: dict[str, CaseCost] = {}
        for chain in chains([s for s in self.shapes if s.case not in self.finished]):
            for previous, shape in zip([None, *chain], chain):  # a full-mode task's kept environment
                unfinished[shape.case] = case_cost(shape, costs, assume, previous)
        self.unfinished = unfinished

    def seconds_left(self, now: float) -> float | None:
        """None until a case completed; else the workers played forward from ``now``."""
        unfinished = self.unfinished
        if unfinished is None:
            return None
        # One C-level copy: the live line's thread reads while the hooks' thread writes.
        running = dict(tuple(self.running.items()))
        # A start told after ``now`` (another process's clock) has run nothing yet, never less.
        held = sorted(max(_whole(unfinished[case]) - max(now - at, 0.0), 0.0)
                      for case, at in running.items() if case in unfinished)[:self.workers]
        free = [(left, n) for n, left in enumerate(held)]  # (free at, worker)
        free += [(0.0, n) for n in range(len(held), self.workers)]
        ahead = {worker: left for left, worker in free}  # what a set-up run ahead can hide behind
        heapq.heapify(free)
        waiting = [s for s in self.shapes if s.case in unfinished and s.case not in running]
        for chain in chains(waiting):
            at, worker = heapq.heappop(free)
            for shape in chain:
                cost = unfinished[shape.case]
                hidden = min(ahead[worker], cost.setup_s) if self.prebuild and cost.hideable else 0.0
                at += _whole(cost) - hidden
                ahead[worker] = cost.episode_s
            heapq.heappush(free, (at, worker))
        return max(at for at, _ in free)

    @property
    def counts(self) -> tuple[int, int]:
        """Cases finished, of all."""
        return len(self.finished), len(self.cases)


def _whole(cost: CaseCost) -> float:
    return cost.setup_s + cost.episode_s


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
