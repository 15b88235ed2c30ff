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
