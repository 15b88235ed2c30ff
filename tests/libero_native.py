"""Privileged access to LIBERO for tests: what the native API yields, by hand.

Test tooling only; the policy path never reads any of this.
"""

from __future__ import annotations

from typing import Any

from pytest_libero.protocol.parameters import SEED, SETTLE_ACTION, SETTLE_CONTROLS


def native_first_observation(suite: str, index: int) -> dict[str, Any]:
    """The first policy observation as LIBERO's own API yields it, per P4."""
    from libero.libero import benchmark
    from libero.libero.envs import OffScreenRenderEnv

    task_suite = benchmark.get_benchmark_dict()[suite](task_order_index=0)
    env = OffScreenRenderEnv(bddl_file_name=task_suite.get_task_bddl_file_path(index),
                             camera_heights=256, camera_widths=256)
    try:
        env.seed(SEED)
        env.reset()
        env.set_init_state(task_suite.get_task_init_states(index)[0])
        for _ in range(SETTLE_CONTROLS):
            obs, _, _, _ = env.step(list(SETTLE_ACTION))
        return dict(obs)
    finally:
        env.close()


def reference_loop_first_observations(
    suite: str, index: int, states: set[int], seed: int = 7
) -> dict[int, dict[str, Any]]:
    """The first observation of each wanted state as openpi's LIBERO loop yields it:
    one env, seeded once, every state in order reset + set_init_state + 10 waits."""
    from libero.libero import benchmark
    from libero.libero.envs import OffScreenRenderEnv

    task_suite = benchmark.get_benchmark_dict()[suite](task_order_index=0)
    initial_states = task_suite.get_task_init_states(index)
    env = OffScreenRenderEnv(bddl_file_name=task_suite.get_task_bddl_file_path(index),
                             camera_heights=256, camera_widths=256)
    found: dict[int, dict[str, Any]] = {}
    try:
        env.seed(seed)
        for state in range(max(states) + 1):
            env.reset()
            env.set_init_state(initial_states[state])
            for _ in range(SETTLE_CONTROLS):
                obs, _, _, _ = env.step(list(SETTLE_ACTION))
            if state in states:
                found[state] = dict(obs)
        return found
    finally:
        env.close()
