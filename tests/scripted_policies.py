"""In-process policies for tests that need a run with a short case and a long one.

Importable by child processes and subprocess pytest runs: put this folder on
PYTHONPATH (see ``TESTS_DIR``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

TESTS_DIR = Path(__file__).resolve().parent


class QuickThenSlow:
    """Stops at once on libero_10-00 ("alphabet soup"); holds still for the whole cap on
    every other task, unless the environment variable FAST is set (a resumed run)."""

    metadata: Mapping[str, Any] = {"policy": "quick-then-slow"}

    def reset(self) -> None:
        pass

    def infer(self, observation: Any) -> Mapping[str, Any]:
        if "alphabet soup" in observation.language or os.environ.get("FAST"):
            return {"stop": True}
        return {"actions": np.array([[0, 0, 0, 0, 0, 0, -1.0]])}

    def close(self) -> None:
        pass


QUICK_THEN_SLOW_PROFILE = """
name = "zero"
[policy]
factory = "scripted_policies:QuickThenSlow"
[stop]
consecutive = 1
"""


class ResetFails:
    """A policy whose every episode fails to start: cases error before any simulator
    is built, which makes cheap runs for tests of the run folder itself."""

    metadata: Mapping[str, Any] = {"policy": "reset-fails"}

    def reset(self) -> None:
        raise ConnectionError("this policy never starts an episode")

    def infer(self, observation: Any) -> Mapping[str, Any]:
        raise AssertionError("never reached")

    def close(self) -> None:
        pass


class CountsSinceReset:
    """A stateful policy: call n after its last reset answers actions whose first value
    is n / 100, so the recorded chunks show whether each episode started fresh. With
    ``die_at_episode`` the serving process exits at that episode's first request, like
    a crashed model server."""

    def __init__(self, die_at_episode: int = 0) -> None:
        self.die_at_episode = die_at_episode
        self.episodes = 0
        self.calls = 0
        self.metadata: Mapping[str, Any] = {"policy": "counts-since-reset"}

    def reset(self) -> None:
        self.episodes += 1
        self.calls = 0

    def infer(self, observation: Any) -> Mapping[str, Any]:
        if self.episodes == self.die_at_episode:
            os._exit(3)
        self.calls += 1
        actions = np.zeros((5, 7))
        actions[:, 0] = self.calls / 100
        actions[:, 6] = -1.0
        return {"actions": actions}

    def close(self) -> None:
        pass


class Overshoots:
    """Small overshoots of the kind un-normalized checkpoints emit: a gripper of 1.02
    and a translation of -1.01 in every action, the rest zero."""

    metadata: Mapping[str, Any] = {"policy": "overshoots"}

    def reset(self) -> None:
        pass

    def infer(self, observation: Any) -> Mapping[str, Any]:
        actions = np.zeros((5, 7))
        actions[:, 1] = -1.01
        actions[:, 6] = 1.02
        return {"actions": actions}

    def close(self) -> None:
        pass


class HangsOnReset:
    """An in-process policy that never starts its episode: the watchdog must blame it."""

    metadata: Mapping[str, Any] = {"policy": "hangs-on-reset"}

    def reset(self) -> None:
        import time

        time.sleep(3600)

    def infer(self, observation: Any) -> Mapping[str, Any]:
        raise AssertionError("never reached")

    def close(self) -> None:
        pass
