"""xdist scheduling for full mode: a task's init states are one unit of work.

A worker receives all of a task's cases, in the order they were collected (native
state order), so the worker's case process can run them in the task's one environment
(``pytest_libero.episode.isolation``). Built only under xdist; imports it.
"""

from __future__ import annotations

import re

from xdist.scheduler import LoadScopeScheduling  # type: ignore[import-untyped]

_STATE_SUFFIX = re.compile(r"-s\d+\]$")


class TaskScheduling(LoadScopeScheduling):  # type: ignore[misc]
    """LoadScopeScheduling whose scope is the task: the case id less ``-s<N>``."""

    def _split_scope(self, nodeid: str) -> str:
        return _STATE_SUFFIX.sub("]", nodeid)
