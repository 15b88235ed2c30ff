"""Record the `demo` profile's shipped demonstrations, and check that they still succeed.

Test tooling, never part of the policy path: a scripted controller reads privileged
simulator state (end-effector and object poses, collision boxes, goal regions) to solve
one task of each suite listed in DEMOS, records every action it sends, and keeps the
recording only if it succeeds again when replayed open loop in a fresh environment built
exactly as the plugin builds fast-mode episodes (seed 20260907, init state 0, ten
settling controls, cameras on; ``make_replay_actions.replay``). Each demo is written as
``<case id>.npy`` (float64, (N, 7): up to the first native success, then its last
action held ten times, a margin never reached on the pinned stack) beside
``<case id>.json``, its provenance: the task, the instruction the policy is keyed by, the
generator and its version, the stack it was recorded on and the action file's sha256.

The controller handles goals made of ``(In object site-region)`` and ``(On object
object)`` predicates, one after another: approach above the object, descend, close,
lift, carry over the target, lower until LIBERO's own check fires (or the object is in
place, then open and rise before the next one). Objects wider than the open gripper
(a bowl) are held by their rim.

Usage::

    MUJOCO_GL=egl python tests/tools/make_demos.py              # record every demo
    MUJOCO_GL=egl python tests/tools/make_demos.py --only libero_goal-06
    MUJOCO_GL=egl python tests/tools/make_demos.py --check      # replay the shipped ones
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from make_replay_actions import (  # noqa: E402
    CLOSE,
    INIT_STATE_INDEX,
    OPEN,
    SEED,
    SETTLE_CONTROLS,
    _move,
    _suite,
    collision_aabb,
    make_env,
    replay,
    settle,
    stack_versions,
)

GENERATOR = "tests/tools/make_demos.py"
GENERATOR_VERSION = 1
"""Bump when the controller changes what it records."""
DEMOS = ("libero_spatial-00", "libero_object-00", "libero_goal-06", "libero_90-46", "libero_10-00")
"""One task per suite, chosen because a simple scripted controller solves it reliably."""
OUT = Path(__file__).resolve().parents[2] / "pytest_libero" / "data" / "demos"

GRIPPER_SPAN = 0.065  # wider than this along y (the fingers' axis): held by the rim
MAX_CLOSE_CONTROLS = 15
OPEN_CONTROLS = 8
ALIGN_TOL = 0.01  # xy error under which the open fingers straddle the grasp point
REACH_TOL = 0.006
TAIL = 10  # controls kept past the first success (see record)
STALL_CONTROLS = 3  # no 2 mm of progress over this many controls: blocked


@dataclass(frozen=True)
class Step:
    """One predicate to make true: carry ``obj`` into a site region or onto an object."""

    predicate: str  # "in" or "on"
    obj: str
    target: str


def goal_steps(env: Any) -> list[Step]:
    """The goal's predicates as steps, or SystemExit naming the unsupported one."""
    steps = []
    for pred in env.env.parsed_problem["goal_state"]:
        name = pred[0].lower()
        if name == "in" and pred[2] in env.env.object_sites_dict:
            steps.append(Step("in", pred[1], pred[2]))
        elif name == "on" and pred[2] in env.env.objects_dict:
            steps.append(Step("on", pred[1], pred[2]))
        else:
            raise SystemExit(f"unsupported goal predicate {pred!r}: need (In obj site-region) "
                             "or (On obj object)")
    return steps


class Expert:
    """Closed-loop scripted controller over privileged state; records every action."""

    def __init__(self, env: Any, obs: Any) -> None:
        self.env, self.obs = env, obs
        self.sim = env.env.sim
        self.actions: list[np.ndarray] = []
        self.success_at = 0

    def body_pos(self, name: str) -> np.ndarray:
        return np.array(self.sim.data.body_xpos[self.env.env.obj_body_id[name]], dtype=float)

    def eef(self) -> np.ndarray:
        return np.array(self.obs["robot0_eef_pos"], dtype=float)

    def act(self, action: np.ndarray) -> bool:
        """Send one action; True once LIBERO's success check fires."""
        action = np.clip(action, -1.0, 1.0)
        self.actions.append(action)
        self.obs, _, done, _ = self.env.step(action.tolist())
        if done:
            self.success_at = len(self.actions)
        return bool(done)

    def go(self, target: np.ndarray, grip: float, *, limit: int, tol: float = REACH_TOL) -> bool:
        """Servo the grip site to ``target`` until within ``tol`` or blocked (an object
        resting on what is below it); True on success (then stop)."""
        trail = [self.eef()]
        for _ in range(limit):
            if np.linalg.norm(target - self.eef()) < tol:
                return False
            if self.act(_move(target, self.eef(), grip)):
                return True
            trail.append(self.eef())
            if len(trail) > STALL_CONTROLS and np.linalg.norm(trail[-1] - trail[-1 - STALL_CONTROLS]) < 0.002:
                return False
        return False

    def hold(self, grip: float, controls: int) -> bool:
        for _ in range(controls):
            action = np.zeros(7)
            action[6] = grip
            if self.act(action):
                return True
        return False

    def grasp_offset(self, name: str) -> np.ndarray:
        """Grip site relative to the object's origin: its centre, or a bowl's rim."""
        lo, hi = collision_aabb(self.env, name)
        origin = self.body_pos(name)
        if hi[1] - lo[1] <= GRIPPER_SPAN:
            return np.array([0.0, 0.0, max(0.005, lo[2] + 0.013 - origin[2])])
        # Too wide for the fingers: pinch the wall on the +y side, 1.6 cm below the rim.
        return np.array([0.0, hi[1] - origin[1] - 0.006, hi[2] - 0.016 - origin[2]])

    def run(self, steps: list[Step], *, max_controls: int = 600) -> None:
        clearance = 0.0
        for i, step in enumerate(steps):
            last = i == len(steps) - 1
            if self.pick(step.obj, clearance) or self.place(step, last=last):
                return
            if len(self.actions) > max_controls:
                return
            clearance = self.eef()[2] + 0.05

    def pick(self, name: str, clearance: float) -> bool:
        """Above the grasp point (at ``clearance`` or higher), down, close."""
        lo, hi = collision_aabb(self.env, name)
        offset = self.grasp_offset(name)
        hover = max(hi[2] + 0.03, clearance)
        grasp = self.body_pos(name) + offset
        if self.go(np.array([grasp[0], grasp[1], max(hover, self.eef()[2])]), OPEN, limit=80,
                   tol=0.02):
            return True
        if self.go(np.array([grasp[0], grasp[1], hover]), OPEN, limit=60, tol=ALIGN_TOL):
            return True
        if self.go(grasp, OPEN, limit=60):
            return True
        return self.close()

    def close(self) -> bool:
        """Close until the fingers stop moving: on the object, or shut on nothing."""
        before = float(self.obs["robot0_gripper_qpos"][0])
        for count in range(1, MAX_CLOSE_CONTROLS + 1):
            if self.hold(CLOSE, 1):
                return True
            now = float(self.obs["robot0_gripper_qpos"][0])
            if count >= 4 and abs(now - before) < 5e-4:
                return False
            before = now
        return False

    def place(self, step: Step, *, last: bool) -> bool:
        """Lift, carry over the target, lower until the predicate holds, release."""
        obj = self.body_pos(step.obj)
        held = obj - self.eef()  # object origin relative to the grip site, once held
        lo, _ = collision_aabb(self.env, step.obj)
        bottom_off = obj[2] - lo[2]
        if step.predicate == "in":
            site = self.env.env.object_sites_dict[step.target]
            centre = np.array(self.sim.data.get_site_xpos(step.target), dtype=float)
            half = np.abs(np.array(self.sim.data.get_site_xmat(step.target)) @ np.array(site.size))
            rim = (collision_aabb(self.env, site.parent_name)[1][2] if site.parent_name
                   else centre[2] + half[2])
            carry_z, drop_z = rim + 0.015 + bottom_off, centre[2]
        else:
            _, top = collision_aabb(self.env, step.target)
            centre = self.body_pos(step.target)
            carry_z, drop_z = top[2] + 0.02 + bottom_off, centre[2] + bottom_off + 0.005
        lift = np.array([self.eef()[0], self.eef()[1], carry_z - held[2]])
        if self.go(lift, CLOSE, limit=60, tol=0.015):
            return True
        over = np.array([centre[0], centre[1], carry_z]) - held
        if self.go(over, CLOSE, limit=100, tol=0.008):
            return True
        down = np.array([centre[0], centre[1], drop_z]) - held
        if self.go(down, CLOSE, limit=60):
            return True
        if last:
            return self.hold(CLOSE, 10)
        if self.hold(OPEN, OPEN_CONTROLS):
            return True
        return self.go(self.eef() + np.array([0.0, 0.0, 0.08]), OPEN, limit=30, tol=0.01)


def split(case: str) -> tuple[str, int]:
    suite, _, index = case.rpartition("-")
    return suite, int(index)


def instruction(case: str) -> str:
    """The words the plugin sends for this case: the demo policy is keyed by them."""
    from pytest_libero.catalog.entries import load_catalog

    [entry] = [e for e in load_catalog().entries if e.case_id == case]
    return entry.language


def record(case: str, out: Path) -> int:
    suite, task = split(case)
    t0 = time.perf_counter()
    env, _ = make_env(suite, task, cameras=False)
    expert = Expert(env, settle(env))
    expert.run(goal_steps(env))
    task_name = _suite(suite).get_task(task).name
    env.close()
    print(f"{case}: {len(expert.actions)} controls, closed-loop success at "
          f"{expert.success_at} ({time.perf_counter() - t0:.1f} s)")
    if not expert.success_at:
        print(f"{case}: the scripted controller did not succeed", file=sys.stderr)
        return 1
    actions = np.asarray(expert.actions, dtype=np.float64)[: expert.success_at]
    result = replay(suite, task, actions, cameras=True)
    print(f"{case}: open-loop replay (the plugin's construction): {json.dumps(result)}")
    first = result["first_success_control"]
    if not first:
        print(f"{case}: the open-loop replay did not succeed", file=sys.stderr)
        return 1
    # A margin past the first success, never reached on the pinned stack: the last
    # action held, so a stack whose physics lands a few controls later still gets there.
    actions = np.concatenate([actions[:first], np.repeat(actions[first - 1 : first], TAIL, axis=0)])
    out.mkdir(parents=True, exist_ok=True)
    np.save(out / f"{case}.npy", actions)
    provenance = {
        "kind": "recorded demonstration (scripted controller on privileged simulator state; "
                "infrastructure evidence, not a model)",
        "case": case,
        "suite": suite,
        "task_index": task,
        "task_name": task_name,
        "instruction": instruction(case),
        "init_state_index": INIT_STATE_INDEX,
        "seed": SEED,
        "settle_controls": SETTLE_CONTROLS,
        "first_success_control": int(first),
        "controls": int(len(actions)),
        "actions_sha256": hashlib.sha256((out / f"{case}.npy").read_bytes()).hexdigest(),
        "generator": GENERATOR,
        "generator_version": GENERATOR_VERSION,
        "stack": stack_versions(),
    }
    (out / f"{case}.json").write_text(json.dumps(provenance, indent=2) + "\n")
    print(f"{case}: wrote {out / f'{case}.npy'} {actions.shape}")
    return 0


def check(case: str, out: Path) -> int:
    """Replay a shipped demo: bytes as recorded, success at the recorded control."""
    meta = json.loads((out / f"{case}.json").read_text())
    data = (out / f"{case}.npy").read_bytes()
    if hashlib.sha256(data).hexdigest() != meta["actions_sha256"]:
        print(f"{case}: the action file's sha256 differs from its provenance", file=sys.stderr)
        return 1
    result = replay(meta["suite"], meta["task_index"], np.load(out / f"{case}.npy"))
    print(f"{case}: {json.dumps(result)}")
    return 0 if result["first_success_control"] == meta["first_success_control"] else 1


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", action="append", choices=DEMOS, help="this demo only (repeatable)")
    ap.add_argument("--out", type=Path, default=OUT, help=f"folder (default {OUT})")
    ap.add_argument("--check", action="store_true", help="replay the shipped demos, write nothing")
    args = ap.parse_args(argv)
    os.environ.setdefault("MUJOCO_GL", "egl")
    job = check if args.check else record
    return max(job(case, args.out) for case in args.only or DEMOS)


if __name__ == "__main__":
    raise SystemExit(main())
