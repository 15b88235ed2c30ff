"""In-process policies for tests that need a run with a short case and a long one.

Importable by child processes and subprocess pytest runs: put this folder on
PYTHONPATH (see ``TESTS_DIR``).
"""

from __future__ import annotations

import os
import time
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


def wait_until_stepping(run: Path, case: str, timeout: float = 300) -> None:
    """Until ``case`` of the run folder ``run`` has delivered its first observation (its
    index is flushed line by line): the slow case is inside its controls, where a kill or
    a Ctrl-C must find it."""
    index = run / "cases" / case / "observations.jsonl"
    deadline = time.monotonic() + timeout
    while not (index.is_file() and index.stat().st_size > 0):
        assert time.monotonic() < deadline, f"{case} delivered no observation in {timeout:.0f} s"
        time.sleep(0.2)


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

    served_episodes = 0
    """Episodes begun in this serving process, over every per-connection object."""

    def __init__(self, die_at_episode: int = 0) -> None:
        self.die_at_episode = die_at_episode
        self.episode = 0
        self.calls = 0
        self.metadata: Mapping[str, Any] = {"policy": "counts-since-reset"}

    def reset(self) -> None:
        CountsSinceReset.served_episodes += 1
        self.episode = CountsSinceReset.served_episodes
        self.calls = 0

    def infer(self, observation: Any) -> Mapping[str, Any]:
        if self.episode == self.die_at_episode:
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


class CountsAcrossEpisodes:
    """A stateful policy for concurrent episodes: call n of an episode answers a first
    action value of n / 100 and a second of g / 100, where g counts every call this
    process served (all episodes), so the recorded chunks show each episode's own count
    and whether two episodes' calls interleaved. Each call sleeps ``delay_s``."""

    served = 0

    def __init__(self, delay_s: float = 0.0) -> None:
        self.delay_s = float(delay_s)
        self.calls = 0
        self.metadata: Mapping[str, Any] = {"policy": "counts-across-episodes"}

    def reset(self) -> None:
        self.calls = 0

    def infer(self, observation: Any) -> Mapping[str, Any]:
        import time

        time.sleep(self.delay_s)
        self.calls += 1
        CountsAcrossEpisodes.served += 1
        actions = np.zeros((5, 7))
        actions[:, 0] = self.calls / 100
        actions[:, 1] = CountsAcrossEpisodes.served / 100
        actions[:, 6] = -1.0
        return {"actions": actions}

    def close(self) -> None:
        pass


class EchoesInBatches:
    """A batch policy (``infer_batch``) with per-episode state: each reply carries its
    request's prompt, the episode's calls since reset and the episode object's id, so
    a test sees which connection got which reply. A prompt containing "explode" makes
    the whole batch raise."""

    metadata: Mapping[str, Any] = {"policy": "echoes-in-batches"}

    def __init__(self) -> None:
        self.calls = 0

    def reset(self) -> None:
        self.calls = 0

    def infer(self, observation: Any) -> Mapping[str, Any]:
        return self.infer_batch([observation], [self])[0]

    def infer_batch(self, observations: Any, episodes: Any) -> list[Mapping[str, Any]]:
        if any("explode" in o.language for o in observations):
            raise ValueError(f"asked to explode in a batch of {len(observations)}")
        replies: list[Mapping[str, Any]] = []
        for observation, episode in zip(observations, episodes, strict=True):
            episode.calls += 1
            replies.append({"actions": np.array([[0, 0, 0, 0, 0, 0, -1.0]]),
                            "echo": observation.language, "calls": episode.calls,
                            "episode": id(episode)})
        return replies

    def close(self) -> None:
        pass


class Sleeps:
    """Holds still, taking ``ms`` milliseconds (default 50) over every answer: a model of
    known latency, for the plan's latency probe and its bench."""

    metadata: Mapping[str, Any] = {"policy": "sleeps"}

    def __init__(self, ms: str = "50") -> None:
        self.seconds = float(ms) / 1000

    def reset(self) -> None:
        pass

    def infer(self, observation: Any) -> Mapping[str, Any]:
        import time

        time.sleep(self.seconds)
        return {"actions": np.tile(np.array([0, 0, 0, 0, 0, 0, -1.0]), (5, 1))}

    def close(self) -> None:
        pass
