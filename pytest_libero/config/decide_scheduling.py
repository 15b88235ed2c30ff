"""xdist scheduling for a run that decides early (``--libero-decide``): in order, and no
case handed out once the verdict is decided.

xdist's own schedulers send workers large batches up front, which a worker runs whatever
the controller learns meanwhile, and out of the order the decision reads. Here each
worker holds at most two cases (the one it runs and the next, which it sets up ahead:
xdist's worker needs its next item before it runs one), and the controller hands out the
next as each ends, in the run's order. Consecutive cases that continue one another (full
mode: a task's later state, a perturbed copy of the same state; the native part of the
order is made of them) form one unit that one worker takes whole, in order, so the kept
environment serves them (``catalog/placement.py``). Once ``decided()`` says
so, nothing more is handed out; the case a worker already holds as its next is skipped
as decided when its turn comes (it finds the run folder's ``decision.json``).
Built only under xdist; imports it.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import pytest
from xdist.scheduler import LoadScheduling  # type: ignore[import-untyped]

from pytest_libero.catalog.case_id import CaseId

HELD = 2
"""Cases a worker holds: the one it runs and its next."""


def case_of(nodeid: str) -> CaseId | None:
    """The case id in an item's node id, if it holds one."""
    head, bracket, param = nodeid.removesuffix("]").rpartition("[")
    if not bracket or not nodeid.endswith("]"):
        return None
    try:
        return CaseId.parse(param)
    except ValueError:
        return None


def continues(before: CaseId | None, after: CaseId | None) -> bool:
    """Whether ``after`` can run in the process that ran ``before``: full mode, the same
    task, a later state (its kept environment), or a perturbed copy of the same state
    (which runs beside it while the kept environment waits)."""
    if before is None or after is None or before.state is None or after.state is None:
        return False
    if before.task != after.task:
        return False
    return after.state > before.state or (after.state == before.state and after.variant is not None)


def units_of(nodeids: Sequence[str]) -> list[list[int]]:
    """Item indices in order, each run of items that continue one another (a task's
    states in order, their perturbed copies) grouped as one unit."""
    units: list[list[int]] = []
    last = None
    for index, nodeid in enumerate(nodeids):
        case = case_of(nodeid)
        if units and continues(last, case):
            units[-1].append(index)
        else:
            units.append([index])
        last = case
    return units


class DecideScheduling(LoadScheduling):  # type: ignore[misc]
    """LoadScheduling that hands out one case at a time, in collection order (the run's
    order), by units of a task, and stops handing out once ``decided()``."""

    def __init__(self, config: pytest.Config, log: Any, decided: Callable[[], bool]) -> None:
        super().__init__(config, log)
        self.collection: list[str] | None = None
        self.decided = decided
        self.units: list[list[int]] = []
        self.node2unit: dict[Any, list[int]] = {}

    def schedule(self) -> None:
        assert self.collection_is_completed
        if self.collection is None:
            if not self._check_nodes_have_same_collection():
                self.log("**Different tests collected, aborting run**")
                return
            collection = list(next(iter(self.node2collection.values())))
            self.collection = collection
            self.units = units_of(collection)
            self.pending[:] = range(len(collection))
        for depth in range(1, HELD + 1):  # round robin: the first cases run side by side
            for node in self.nodes:
                self._fill(node, depth)

    def check_schedule(self, node: Any, duration: float = 0) -> None:
        self._fill(node, HELD)

    def _fill(self, node: Any, depth: int) -> None:
        """Hand ``node`` cases until it holds ``depth`` (none once decided)."""
        if node.shutting_down:
            return
        if self.decided():
            self.pending.clear()  # never handed out: the decision made them unneeded
            self.units.clear()
            self.node2unit.clear()
        held = self.node2pending[node]
        sent: list[int] = []
        while len(held) + len(sent) < depth:
            index = self._next_for(node)
            if index is None:
                break
            sent.append(index)
        if sent:
            held.extend(sent)
            node.send_runtest_some(sent)
        if not self.pending and depth == HELD:
            node.shutdown()

    def _next_for(self, node: Any) -> int | None:
        """The node's unit's next case, else the first case of the next unit."""
        unit = self.node2unit.get(node)
        if not unit:
            if not self.units:
                return None
            unit = self.node2unit[node] = self.units.pop(0)
        index = unit.pop(0)
        self.pending.remove(index)
        return index

    def remove_node(self, node: Any) -> str | None:
        """A worker gone: what it held and its unit's rest go back to the front, in order;
        the case it was running is the crash item."""
        held = self.node2pending.pop(node)
        back = held[1:] + self.node2unit.pop(node, [])
        if back:
            self.units.insert(0, back)
            self.pending.extend(back)
        for other in self.node2pending:
            self.check_schedule(other)
        return self.collection[held[0]] if held and self.collection is not None else None

    def mark_test_pending(self, item: str) -> None:
        assert self.collection is not None
        index = self.collection.index(item)
        self.units.insert(0, [index])
        self.pending.append(index)
        for node in self.node2pending:
            self.check_schedule(node)
