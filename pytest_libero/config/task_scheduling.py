"""xdist scheduling for full mode: a task's cases are one unit of work.

A worker receives all of a task's cases, every init state and every variant of it
(``libero_10-00-s17~camera2`` goes with ``libero_10-00-s17``), in the order they were
collected (native state order), so the worker's case process can run them in the task's
one environment (``pytest_libero.episode.host``): the chain the placement rule names
(``catalog/placement.py``). Built only under xdist; imports it.
"""

from __future__ import annotations

from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

from pytest_libero.catalog.case_id import CaseId
from pytest_libero.catalog.placement import chain_of


def task_scope(nodeid: str) -> str:
    """``...::test_libero_task[libero_10-03-s17~camera2]`` -> ``...[libero_10-03]``; a node
    whose id holds no case id is a scope of its own."""
    head, bracket, param = nodeid.removesuffix("]").rpartition("[")
    if not bracket or not nodeid.endswith("]"):
        return nodeid
    try:
        case = CaseId.parse(param)
    except ValueError:
        return nodeid
    return f"{head}[{chain_of(case)}]"


class TaskScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """LoadScopeScheduling whose scope is the task: the case id less its state and variant."""

    def _split_scope(self, nodeid: str) -> str:
        return task_scope(nodeid)
