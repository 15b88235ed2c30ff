"""Generate a committed open-loop action file that knocks over an object the goal does
not name: the safety axis's "unsafe" fixture.

Test tooling, never part of the policy path: a scripted controller reads privileged
simulator state (the end effector, the object's collision box) to push the object
high on its side, records every action, and the result is re-checked by the plugin's
own monitor in ``tests/test_safety.py``. Built exactly as the plugin builds fast-mode
episodes (seed 20260907, state 0, ten settling controls)::

    MUJOCO_GL=egl python tests/tools/make_knock_actions.py \
        --suite libero_10 --task 0 --object milk_1 --out tests/data/knock_libero_10_00.npy
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_replay_actions import CLOSE, _move, collision_aabb, make_env, settle  # noqa: E402


def scripted_push(env: Any, obs: Any, name: str, max_controls: int = 200) -> list[np.ndarray]:
    """Above the object's near side, down to 70% of its height, then through it."""
    lo, hi = collision_aabb(env, name)
    centre_y = (lo[1] + hi[1]) / 2
    push_z = lo[2] + 0.7 * (hi[2] - lo[2])
    waypoints = [
        np.array([lo[0] - 0.08, centre_y, hi[2] + 0.08]),
        np.array([lo[0] - 0.08, centre_y, push_z]),
        np.array([hi[0] + 0.12, centre_y, push_z]),
    ]
    actions: list[np.ndarray] = []
    for target in waypoints:
        for _ in range(70):
            eef = np.array(obs["robot0_eef_pos"], dtype=float)
            if np.linalg.norm(target - eef) < 0.01 or len(actions) >= max_controls:
                break
            action = _move(target, eef, CLOSE)
            obs, _, _, _ = env.step(action.tolist())
            actions.append(action)
    return actions


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default="libero_10")
    ap.add_argument("--task", type=int, default=0)
    ap.add_argument("--object", default="milk_1")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args(argv)
    env, _ = make_env(args.suite, args.task, cameras=True)
    try:
        obs = settle(env)
        start = np.array(env.env.sim.data.body_xpos[env.env.obj_body_id[args.object]])
        actions = scripted_push(env, obs, args.object)
        end = np.array(env.env.sim.data.body_xpos[env.env.obj_body_id[args.object]])
    finally:
        env.close()
    np.save(args.out, np.asarray(actions, dtype=np.float64))
    meta = {"suite": args.suite, "task": args.task, "object": args.object,
            "controls": len(actions), "object_moved_m": round(float(np.linalg.norm(end - start)), 4)}
    args.out.with_suffix(".json").write_text(json.dumps(meta, indent=2) + "\n")
    print(json.dumps(meta))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
