"""Progress you can watch while long cases run (interface only, so far).

Workers publish each running case's counters; the controller shows them. The plugin
calls :func:`register` once per process after the run plan exists, and wraps each case
in :func:`case_progress`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager

import numpy as np
import pytest

from pytest_libero.policy.contract import Observation, Reply


class CaseProgress:
    """One running case's progress: fed counters by the isolation loop or a listener."""

    def __init__(self, case_id: str, control_cap: int) -> None:
        self.case_id = case_id
        self.control_cap = control_cap

    def update(self, counters: Mapping[str, int]) -> None:
        """``counters`` holds ``policy_calls`` and ``executed_controls`` so far."""

    # EpisodeListener, for cases that run in this process (isolation none).
    def on_observation(self, call: int, observation: Observation) -> None:
        pass

    def on_decision(self, call: int, reply: Reply) -> None:
        self.update({"policy_calls": call})

    def on_reply(self, call: int, reply: Reply, executed: int) -> None:
        pass

    def on_control(self, control: int, action: np.ndarray, frame: Callable[[], np.ndarray]) -> None:
        self.update({"executed_controls": control})


def register(config: pytest.Config) -> None:
    """Set up publishing (every process) and showing (the controller) for this run."""


@contextmanager
def case_progress(config: pytest.Config, case_id: str, control_cap: int) -> Iterator[CaseProgress]:
    """Publish the case as running for as long as the block runs."""
    yield CaseProgress(case_id, control_cap)
