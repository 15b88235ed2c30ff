"""Budgets (P7) and the voluntary-stop rule (P9): how long an episode may run.

Plain values the plan computes and the control loop obeys; each budget says where its
control cap came from.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True)
class Budget:
    """How long an episode may run, and where that limit comes from (P7)."""

    mode: str
    control_cap: int
    cap_source: str
    replan_interval: int
    max_policy_calls: int

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def horizon_budget(horizon: int, source: str, replan_interval: int) -> Budget:
    """The suite's reference horizon. Policy calls are capped at the control cap,
    the most that can ever execute a control each, so stop-only answers cannot loop."""
    return Budget("horizon", horizon, source, replan_interval, horizon)


def decisions_budget(max_policy_calls: int, replan_interval: int) -> Budget:
    cap = max_policy_calls * replan_interval
    source = f"decisions: max_policy_calls {max_policy_calls} x replan_interval {replan_interval}"
    return Budget("decisions", cap, source, replan_interval, max_policy_calls)


@dataclass(frozen=True)
class StopRule:
    """A profile's voluntary-stop rule: stop after N consecutive stop signals.

    ``consecutive=None`` ignores stop signals (each still costs a policy call).
    """

    consecutive: int | None = None

    def describe(self) -> str:
        if self.consecutive is None:
            return "ignore"
        return "immediate" if self.consecutive == 1 else f"after {self.consecutive} consecutive"
