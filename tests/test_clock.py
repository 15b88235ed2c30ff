"""The simulated clock (protocol/clock.py) control by control: with every delay 0 it is
the synchronous protocol exactly; with delays, each control runs what the latest usable
chunk meant for that moment, holds where there is none, and never runs a stale head."""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

from pytest_libero.episode.loop import EpisodeResult, run_episode
from pytest_libero.policy.contract import Observation
from pytest_libero.protocol.budgets import Budget, StopRule, decisions_budget
from pytest_libero.protocol.clock import CONTROL_PERIOD_S, ChunkTiming, Clock, measured_delay


def chunk(call: int, horizon: int) -> np.ndarray:
    """Actions whose values name their call and index (the gripper alternates by call)."""
    rows = [[call / 100, index / 100, 0, 0, 0, 0, 1.0 if call % 2 else -1.0] for index in range(horizon)]
    return np.asarray(rows, dtype=np.float64).reshape(horizon, 7)


@dataclass
class Scripted:
    """A policy answering call n with ``replies[n - 1]``: (horizon or None, stop)."""

    replies: list[tuple[int | None, bool]]
    metadata: Mapping[str, Any] = field(default_factory=dict)
    calls: int = 0

    def reset(self) -> None:
        self.calls = 0

    def infer(self, observation: Observation) -> Mapping[str, Any]:
        self.calls += 1
        horizon, stop = self.replies[self.calls - 1]
        reply: dict[str, Any] = {"stop": stop}
        if horizon is not None:
            reply["actions"] = chunk(self.calls, horizon)
        return reply


@dataclass
class Env:
    """Keeps every control's action, which steps promised an observation, and when each
    observation was taken; succeeds at control ``success_at`` (1-based)."""

    success_at: int | None = None
    actions: list[np.ndarray] = field(default_factory=list)
    promised: list[bool] = field(default_factory=list)
    observed_at: list[int] = field(default_factory=list)

    def observe(self, policy_calls: int, executed_controls: int) -> Observation:
        self.observed_at.append(executed_controls)
        image = np.zeros((4, 4, 3), dtype=np.uint8)
        return Observation("task", {"agentview": image, "robot0_eye_in_hand": image},
                           None, policy_calls, executed_controls)

    def step(self, action: np.ndarray, observe_next: bool = True) -> bool:
        self.actions.append(np.array(action))
        self.promised.append(observe_next)
        return self.success_at == len(self.actions)

    def frame(self) -> np.ndarray:
        return np.zeros((4, 4, 3), dtype=np.uint8)


def synchronous_reference(replies: list[tuple[int | None, bool]], budget: Budget,
                          success_at: int | None) -> tuple[list[np.ndarray], list[int], list[bool]]:
    """The synchronous loop as the protocol states it (P6-P9): each reply's first K
    actions, then a fresh observation; a stop alone costs a call and no control."""
    actions: list[np.ndarray] = []
    observed: list[int] = []
    promised: list[bool] = []
    calls = 0
    while len(actions) < budget.control_cap and calls < budget.max_policy_calls:
        observed.append(len(actions))
        calls += 1
        horizon, _ = replies[calls - 1]
        if horizon is None:
            continue
        prefix = chunk(calls, horizon)[: min(budget.replan_interval, budget.control_cap - len(actions))]
        another = calls < budget.max_policy_calls and len(actions) + len(prefix) < budget.control_cap
        for n, action in enumerate(prefix, start=1):
            actions.append(action)
            promised.append(another and n == len(prefix))
            if success_at == len(actions):
                return actions, observed, promised
    return actions, observed, promised


def episode(replies: list[tuple[int | None, bool]], budget: Budget, success_at: int | None,
            delays: Callable[[int, float], int] | None = None) -> tuple[Env, EpisodeResult]:
    env = Env(success_at)
    kwargs = {} if delays is None else {"delays": delays}
    result = run_episode(env, Scripted(replies), budget, StopRule(None), init_controls=10, **kwargs)
    assert result.error is None, result.error
    return env, result


@pytest.mark.parametrize("seed", range(200))
def test_with_no_delay_the_clock_is_the_synchronous_protocol(seed: int) -> None:
    rng = random.Random(seed)
    budget = decisions_budget(rng.randint(1, 8), rng.randint(1, 6))
    replies = [(None, True) if rng.random() < 0.15 else (rng.randint(1, 9), False) for _ in range(8)]
    success_at = rng.choice([None, rng.randint(1, 30)])
    env, result = episode(replies, budget, success_at)
    actions, observed, promised = synchronous_reference(replies, budget, success_at)
    assert [a.tobytes() for a in env.actions] == [a.tobytes() for a in actions]
    assert env.observed_at == observed and env.promised == promised
    counters = result.counters
    assert (counters.held_controls, counters.stale_actions) == (0, 0)
    assert [c["call"] for c in result.chunks] == list(range(1, len(env.observed_at) + 1))
    assert sum(c["executed"] for c in result.chunks) == len(actions)


def reference_schedule(horizons: list[int | None], delays: list[int], interval: int,
                       controls: int) -> tuple[list[int], list[tuple[int, int] | None]]:
    """The issue's rule written out: sending times, then for each control the (call,
    index) of the latest arrived chunk that covers it, or None (a hold)."""
    sent = [0]
    for n, (horizon, delay) in enumerate(zip(horizons, delays)):
        step = min(interval, horizon or 0)
        sent.append(max(sent[n] + step, sent[n] + delay))
    plan: list[tuple[int, int] | None] = []
    for control in range(controls):
        arrived = [n for n in range(len(horizons))
                   if sent[n] + delays[n] <= control and horizons[n]]
        if not arrived:
            plan.append(None)
            continue
        latest = arrived[-1]
        index = control - sent[latest]
        plan.append((latest + 1, index) if index < (horizons[latest] or 0) else None)
    return sent[: len(horizons)], plan


@pytest.mark.parametrize("seed", range(150))
def test_each_control_runs_what_the_latest_usable_chunk_meant_for_it(seed: int) -> None:
    rng = random.Random(seed)
    interval = rng.randint(1, 6)
    calls = rng.randint(2, 8)
    horizons = [None if rng.random() < 0.1 else rng.randint(1, 12) for _ in range(calls)]
    delays = [rng.randint(0, 10) for _ in range(calls)]
    budget = Budget("decisions", 60, "test", interval, calls)
    env, result = episode([(h, h is None) for h in horizons], budget, None,
                          delays=lambda call, latency: delays[call - 1])
    sent, plan = reference_schedule(horizons, delays, interval, len(env.actions))
    assert env.observed_at == sent[: len(env.observed_at)]
    gripper = -1.0
    for control, (action, expected) in enumerate(zip(env.actions, plan)):
        if expected is None:  # a hold: no motion, the last gripper command
            assert action[:6].tolist() == [0.0] * 6 and action[6] == gripper, control
        else:
            call, index = expected
            assert action.tobytes() == chunk(call, horizons[call - 1] or 0)[index].tobytes(), control
            assert index >= delays[call - 1]  # the stale head never runs
            gripper = action[6]
    held = sum(p is None for p in plan)
    assert result.counters.held_controls == held
    assert result.counters.stale_actions == sum(min(d, h or 0) for d, h in zip(delays, horizons))
    for summary in result.chunks:
        n = summary["call"]
        ran = [i for c, p in enumerate(plan) if p is not None and p[0] == n for i in [p[1]]]
        assert summary["executed"] == len(ran)
        assert summary["first_executed_index"] == (ran[0] if ran else None)
        assert summary["sent_at_control"] == sent[n - 1]
        assert summary["usable_at_control"] == sent[n - 1] + delays[n - 1]
    assert [c["call"] for c in result.chunks] == sorted(c["call"] for c in result.chunks)


def test_a_delay_longer_than_the_chunk_holds_and_nothing_breaks() -> None:
    budget = Budget("decisions", 30, "test", 4, 3)
    env, result = episode([(4, False)] * 3, budget, None, delays=lambda call, latency: 9)
    assert result.outcome == "failure" and result.truncation == "policy_call_cap"
    assert all(a[:6].tolist() == [0.0] * 6 for a in env.actions)
    assert env.observed_at == [0, 9, 18]
    assert result.counters.held_controls == len(env.actions) == 27  # the next call was due at 27
    assert result.counters.stale_actions == 12
    assert [c["executed"] for c in result.chunks] == [0, 0, 0]


def test_the_first_controls_hold_the_settled_gripper_until_the_first_reply() -> None:
    budget = decisions_budget(2, 5)
    env, result = episode([(8, False), (8, False)], budget, None, delays=lambda call, latency: 3)
    assert [a[6] for a in env.actions[:3]] == [-1.0] * 3 and env.actions[0][:6].tolist() == [0.0] * 6
    assert env.actions[3].tobytes() == chunk(1, 8)[3].tobytes()
    assert result.chunks[0]["first_executed_index"] == 3


@pytest.mark.parametrize(("latency", "controls"), [
    (0.0, 1), (0.001, 1), (0.05, 1), (0.0501, 2), (0.12, 3), (0.4, 8), (1.0, 20),
])
def test_a_measured_latency_is_its_controls_rounded_up_at_least_one(latency: float, controls: int) -> None:
    assert measured_delay(latency) == controls
    assert CONTROL_PERIOD_S == 0.05


def test_replies_are_handed_back_in_call_order_once_they_can_no_longer_run() -> None:
    clock = Clock(replan_interval=2)
    clock.send(ChunkTiming(1, 0, 0, 0.0, 5), chunk(1, 5))
    assert clock.action(0)[1] is not None and clock.finished() == []
    clock.action(1)
    clock.send(ChunkTiming(2, 2, 3, 0.0, 0), None)  # a stop alone, late
    clock.action(2)
    assert clock.finished() == []  # call 1 still runs while call 2 is in flight
    clock.action(3)
    clock.action(4)
    assert clock.action(5)[1] is None  # past call 1's end: a hold
    assert [t.call for t in clock.finished()] == [1, 2]
