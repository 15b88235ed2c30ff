"""A training loop that watches LIBERO success every few steps with pytest_libero.evaluate.

    python examples/training/evaluate_in_loop.py                  # 6 steps, evaluate every 3
    python examples/training/evaluate_in_loop.py --steps 2 --every 2 --tasks 0

Numpy only: the "model" is a linear map from the robot's proprio vector to an action,
and a training step nudges its weights at random (a stand-in for an optimizer). The
policy object lives in this process; evaluate() serves it from a thread and runs the
suite in a child pytest, so the simulator never enters the trainer. Each evaluation is
small (a few libero_10 tasks, a short decisions budget) and gated with decide=exact,
which stops as soon as the gate's verdict is settled. The curve is printed as it grows.
"""

from __future__ import annotations

import argparse
from typing import Any

import numpy as np

from pytest_libero import evaluate


class LinearPolicy:
    """actions = tanh(W @ proprio), the same action for the K controls of a chunk."""

    metadata: dict[str, Any] = {}

    def __init__(self, seed: int = 0) -> None:
        self.rng = np.random.default_rng(seed)
        self.weights = np.zeros((7, 9))

    def reset(self) -> None:
        pass

    def infer(self, observation: Any) -> dict[str, Any]:
        action = np.tanh(self.weights @ np.asarray(observation.proprio, dtype=np.float64))
        return {"actions": np.tile(action, (5, 1))}

    def train_step(self) -> None:
        self.weights += self.rng.normal(scale=0.01, size=self.weights.shape)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--steps", type=int, default=6)
    parser.add_argument("--every", type=int, default=3, help="evaluate every N steps")
    parser.add_argument("--tasks", default="0,1", help="libero_10 task ids to evaluate on")
    parser.add_argument("--results", default="libero-results")
    args = parser.parse_args()
    policy = LinearPolicy()
    for step in range(1, args.steps + 1):
        policy.train_step()
        if step % args.every:
            continue
        result = evaluate(policy, scope="task_coverage", suite="libero_10", task_ids=args.tasks,
                          track="rgb+proprio", budget_mode="decisions", max_policy_calls=4,
                          replan_interval=5, min_success=0.5, decide="exact", results=args.results)
        low, high = result.interval
        rate = "n/a" if result.success_rate is None else f"{result.success_rate:.0%}"
        score = "n/a" if result.score is None else f"{result.score:.2f}"
        print(f"step {step}: success {rate} ({low:.0%}-{high:.0%}), score {score}, gate "
              f"{result.gate}, {len(result.outcomes)} cases run, {result.run_dir}", flush=True)


if __name__ == "__main__":
    main()
