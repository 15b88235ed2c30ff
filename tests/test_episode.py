"""Unit tests of the episode loop (P6-P9) against a scripted fake environment.

The real simulator proves the same rules in test_simulator_cases.py; here every branch
is exercised in milliseconds with hand-computed counters.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pytest

from pytest_libero.episode.loop import run_episode
from pytest_libero.policy.contract import Observation
from pytest_libero.protocol.budgets import StopRule, decisions_budget, horizon_budget
from pytest_libero.protocol.errors import EnvironmentFault

HOLD = [0, 0, 0, 0, 0, 0, -1.0]


class FakeEnv:
    """Succeeds natively at a chosen control (1-based), or never."""

    def __init__(self, succeed_at: int | None = None, fail_at: int | None = None) -> None:
        self.succeed_at = succeed_at
        self.fail_at = fail_at
        self.steps: list[np.ndarray] = []
        self.observed_next: list[bool] = []

    def observe(self, policy_calls: int, executed_controls: int) -> Observation:
        image = np.zeros((256, 256, 3), np.uint8)
        return Observation("task", {"agentview": image, "robot0_eye_in_hand": image}, None,
                           policy_calls, executed_controls)

    def frame(self) -> np.ndarray:
        return np.full((256, 256, 3), len(self.steps), np.uint8)

    def step(self, action: np.ndarray, observe_next: bool = True) -> bool:
        self.steps.append(action)
        self.observed_next.append(observe_next)
        if self.fail_at is not None and len(self.steps) == self.fail_at:
            raise RuntimeError("mujoco exploded")
        return self.succeed_at is not None and len(self.steps) >= self.succeed_at


class Scripted:
    """Replies from a list; records what it saw."""

    metadata: Mapping[str, Any] = {}

    def __init__(self, replies: list[Any]) -> None:
        self.replies = list(replies)
        self.seen: list[tuple[int, int]] = []
        self.resets = 0

    def reset(self) -> None:
        self.resets += 1

    def infer(self, observation: Observation) -> Any:
        self.seen.append((observation.policy_calls, observation.executed_controls))
        reply = self.replies.pop(0)
        if isinstance(reply, Exception):
            raise reply
        return reply

    def close(self) -> None:
        pass


def chunk(n: int) -> dict[str, Any]:
    return {"actions": np.tile(HOLD, (n, 1))}


def test_the_env_is_told_which_controls_images_a_policy_will_see() -> None:
    # The last control of each chunk, except where the budget allows no next call.
    env = FakeEnv()
    run_episode(env, Scripted([chunk(3), chunk(3)]), decisions_budget(2, 3), StopRule(None),
                init_controls=0)
    assert env.observed_next == [False, False, True, False, False, False]
    capped = FakeEnv()  # the control cap ends the episode inside the second chunk
    run_episode(capped, Scripted([chunk(3)] * 3), horizon_budget(5, "test", 3), StopRule(None),
                init_controls=0)
    assert capped.observed_next == [False, False, True, False, False]


def test_counters_with_stop_only_reply_and_short_final_chunk() -> None:
    # D=4, K=3: exec 3 of 5, stop-only (call, no decision), exec 3 of 3, exec 2 of 2.
    policy = Scripted([chunk(5), {"stop": True}, chunk(3), chunk(2)])
    result = run_episode(FakeEnv(), policy, decisions_budget(4, 3), StopRule(None), init_controls=10)
    c = result.counters
    assert (c.policy_calls, c.decisions, c.executed_controls, c.init_controls) == (4, 3, 8, 10)
    assert c.stop_signals == 1
    assert (c.first_success_control, c.first_success_policy_call) == (None, None)
    assert result.outcome == "failure" and result.truncation == "policy_call_cap"
    assert result.termination is None
    assert [ch["executed"] for ch in result.chunks] == [3, 0, 3, 2]
    assert policy.seen == [(0, 0), (1, 3), (2, 3), (3, 6)]


def test_first_success_is_counted_not_derived() -> None:
    # K=5, success at control 7: second call, third control of its chunk.
    env = FakeEnv(succeed_at=7)
    result = run_episode(env, Scripted([chunk(5), chunk(5)]), decisions_budget(10, 5),
                         StopRule(None), init_controls=10)
    assert result.outcome == "success" and result.termination == "success"
    assert result.truncation is None
    assert result.counters.first_success_control == 7
    assert result.counters.first_success_policy_call == 2
    assert result.counters.executed_controls == 7  # stops at the first success
    assert len(env.steps) == 7


def test_control_cap_truncates_the_last_chunk() -> None:
    budget = horizon_budget(7, "test horizon", replan_interval=5)
    result = run_episode(FakeEnv(), Scripted([chunk(5), chunk(5)]), budget, StopRule(None),
                         init_controls=10)
    assert result.truncation == "control_cap"
    assert result.counters.executed_controls == 7
    assert [ch["executed"] for ch in result.chunks] == [5, 2]


def test_horizon_mode_bounds_a_policy_that_only_stops() -> None:
    budget = horizon_budget(3, "test horizon", replan_interval=1)
    result = run_episode(FakeEnv(), Scripted([{"stop": True}] * 3), budget, StopRule(None),
                         init_controls=10)
    assert result.truncation == "policy_call_cap"
    assert result.counters.policy_calls == 3 and result.counters.decisions == 0


def test_voluntary_stop_needs_consecutive_signals() -> None:
    replies = [{"stop": True}, chunk(1), {"stop": True}, {"actions": np.zeros((1, 7)), "stop": True}]
    result = run_episode(FakeEnv(), Scripted(replies), decisions_budget(10, 1), StopRule(2),
                         init_controls=10)
    assert result.truncation == "voluntary_stop"
    assert result.counters.policy_calls == 4
    assert result.counters.stop_signals == 3
    assert result.counters.decisions == 2


def test_stop_rule_cannot_postpone_success() -> None:
    reply = {"actions": np.tile(HOLD, (2, 1)), "stop": True}
    result = run_episode(FakeEnv(succeed_at=1), Scripted([reply]), decisions_budget(5, 2),
                         StopRule(1), init_controls=10)
    assert result.outcome == "success" and result.truncation is None
    assert result.counters.stop_signals == 0


@pytest.mark.parametrize(
    ("reply", "kind", "words"),
    [
        ({"actions": np.full((2, 7), np.nan)}, "invalid_action", "non-finite"),
        ({"actions": np.zeros((2, 6))}, "invalid_action", "shape"),
        ({"no": 1}, "invalid_action", "no 'actions'"),
        (ConnectionError("server gone"), "policy_transport", "server gone"),
    ],
)
def test_errors_are_recorded_not_raised(reply: Any, kind: str, words: str) -> None:
    result = run_episode(FakeEnv(), Scripted([chunk(1), reply]), decisions_budget(5, 1),
                         StopRule(None), init_controls=10)
    assert result.outcome == "errored"
    assert result.error is not None
    assert result.error["kind"] == kind and words in result.error["message"]
    assert result.counters.executed_controls == 1  # what happened before is kept
    assert "Traceback" in result.error["traceback"]


def test_simulator_fault_is_an_environment_error() -> None:
    result = run_episode(FakeEnv(fail_at=2), Scripted([chunk(3)]), decisions_budget(5, 3),
                         StopRule(None), init_controls=10)
    assert result.outcome == "errored"
    assert result.error is not None and result.error["kind"] == EnvironmentFault.kind
    assert "mujoco exploded" in result.error["message"]
    assert result.counters.executed_controls == 1


def test_budget_sources_are_recorded() -> None:
    assert decisions_budget(200, 5).control_cap == 1000
    assert "200" in decisions_budget(200, 5).cap_source
    assert horizon_budget(520, "starvla", 5).as_dict() == {
        "mode": "horizon", "control_cap": 520, "cap_source": "starvla",
        "replan_interval": 5, "max_policy_calls": 520,
    }
