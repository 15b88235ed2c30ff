"""LiberoBenchmarkAdapter: a case's LIBERO episode (P4-P8).

It builds a fresh native environment per episode, installs the released init state,
runs the settling controls, turns native observations into the protocol's
:class:`Observation` and reports LIBERO's own success after every control. A case's
perturbation acts through its hooks at each moment (perturb/kind.py), whatever its kind.

Fast mode seeds 20260907 and starts from state 0 (P3). A full-mode case (an entry with
``state``) reproduces episode ``state`` of openpi's loop, which seeds 7 once and runs
the states in order in one environment: reusing that environment carries nothing into
an episode but the position of numpy's global random stream, which ``reset()`` draws
placements from, and what the previous reset left (docs/full-mode.md). So the case
seeds 7 and makes the ``state`` native resets the loop makes before that episode
(:mod:`pytest_libero.adapters.random_stream`), then its own.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from pytest_libero.adapters.goal_probe import GoalProbe
from pytest_libero.adapters.random_stream import replay_resets
from pytest_libero.adapters.safety_probe import SafetyProbe
from pytest_libero.adapters.setup_work import compiled_once, unseen_renders
from pytest_libero.catalog.entries import Entry
from pytest_libero.catalog.inventory import installed_files, load_states, states_sha256
from pytest_libero.catalog.placement import Placement
from pytest_libero.goals.progress import ProgressRecord
from pytest_libero.perturb.kind import Applied
from pytest_libero.perturb.registry import applying
from pytest_libero.policy.contract import Observation
from pytest_libero.protocol.errors import EnvironmentFault
from pytest_libero.protocol.hashing import sha256_file
from pytest_libero.protocol.parameters import (
    CAMERAS,
    FULL_SEED,
    IMAGE_SIZE,
    INIT_STATE_INDEX,
    SEED,
    SETTLE_ACTION,
    SETTLE_CONTROLS,
)
from pytest_libero.protocol.rendering import prepare_simulator_environment
from pytest_libero.safety.signals import Signals


class RenderGate:
    """Stands in for a camera's sensor: renders only when the image will be consumed.

    robosuite samples each camera inside the physics substep loop, at a phase set by
    its own timer. The gate leaves the observable enabled, so that timer advances
    exactly as it does natively, and only decides whether the sample is a real render
    or the previous image. A consumed image is therefore rendered at the same substep
    as without the gate, and is byte-identical.
    """

    def __init__(self, sensor: Any, shape: tuple[int, int, int]) -> None:
        self.sensor = sensor
        self.__modality__ = getattr(sensor, "__modality__", "image")
        self.wanted = False
        self.renders = 0
        self.last: np.ndarray = np.zeros(shape, dtype=np.uint8)

    def __call__(self, obs_cache: dict[str, Any]) -> np.ndarray:
        if self.wanted:
            self.last = self.sensor(obs_cache)
            self.renders += 1
        return self.last


@dataclass
class KeptEnvironment:
    """A full-mode task's environment after an episode, kept for the task's next state.

    ``resets`` counts the native resets made since ``env.seed``: the positioning
    resets and every episode's own. openpi's loop reuses one environment per task the
    same way, so the next state needs only the resets it would have made in between.
    """

    env: Any
    bddl_file: str
    horizon: int
    resets: int
    first_state: int
    episodes: int

    def check(self, entry: Entry, horizon: int) -> None:
        """Refuse an episode this environment cannot be: another task's, another
        horizon's, or a state whose resets it has already passed. The case host only
        continues a task's later states here (``catalog/placement.py``); this guards
        the bytes should that ever break."""
        state = entry.state
        if (state is None or entry.bddl_file != self.bddl_file or horizon != self.horizon
                or state < self.resets):
            raise EnvironmentFault(
                f"{entry.case_id} (horizon {horizon}) was to continue in the environment kept "
                f"from state {self.first_state} of {self.bddl_file} (horizon {self.horizon}, "
                f"{self.resets} resets made), which cannot serve it: a kept environment serves "
                "only its task's later states. This is a pytest-libero bug; please report it"
            )


class LiberoEpisode:
    """A reset, settled LIBERO environment for one episode: built fresh, or in full
    mode the task's environment kept from its previous state (``kept``).

    With ``render="consumed"`` a camera renders only for controls whose image is used:
    both cameras before each policy decision, agentview every ``video_stride`` controls
    for the video. ``render="all"`` renders every camera at every control, as LIBERO
    does by default. ``keep`` is told the environment at :meth:`close` instead of it
    being closed (a long-lived case process runs the task's next state in it).
    """

    def __init__(
        self,
        entry: Entry,
        *,
        track: str,
        control_cap: int,
        render: str = "consumed",
        video_stride: int = 1,
        monitor_safety: bool = True,
        kept: KeptEnvironment | None = None,
        keep: Callable[[KeptEnvironment], None] | None = None,
    ) -> None:
        prepare_simulator_environment()
        self.monitor_safety = monitor_safety
        self.safety: SafetyProbe | None = None
        self.goals: GoalProbe | None = None
        self.entry = entry
        self.track = track
        self.render = render
        self.video_stride = video_stride
        self.controls = 0
        self.gates: dict[str, RenderGate] = {}
        self.init_controls = 0
        self.identity: dict[str, Any] = {}
        self._env: Any = None
        self._obs: dict[str, Any] = {}
        self._keep = keep
        self._kept: KeptEnvironment | None = None
        self._perturbation = Applied(self)
        try:
            self._build(control_cap, kept)
        except Exception as exc:
            self._keep = None  # an environment that failed to build or settle is not reused
            self.close()
            raise EnvironmentFault(
                f"could not build and settle {entry.case_id} ({entry.name}): "
                f"{type(exc).__name__}: {exc}"
            ) from exc

    def _build(self, control_cap: int, kept: KeptEnvironment | None) -> None:
        with warnings.catch_warnings():
            # robosuite calls a deprecated logging method at import time.
            warnings.simplefilter("ignore", DeprecationWarning)
            from libero.libero.envs import OffScreenRenderEnv

        self._perturbation = applying(self.entry, self)
        bddl, states_file = installed_files(self.entry.bddl_file, self.entry.init_states_file)
        states = load_states(states_file)
        full = self.entry.state is not None
        index = self.entry.state if self.entry.state is not None else INIT_STATE_INDEX
        seed = FULL_SEED if full else SEED
        state = np.ascontiguousarray(states[index], dtype=np.float64)
        self.identity = {
            "bddl_file": str(bddl),
            "bddl_sha256": sha256_file(bddl),
            "init_file": str(states_file),
            "init_file_sha256": sha256_file(states_file),
            "states_array_sha256": states_sha256(states),
            "init_state_index": index,
            "state_sha256": states_sha256(state),
            "seed": seed,
        }
        horizon = SETTLE_CONTROLS + control_cap + 1
        with compiled_once():  # the build and every reset compile one scene (setup_work.py)
            if kept is not None:
                self._env, made = kept.env, kept.resets
                kept.check(self.entry, horizon)
                self._kept = replace(kept, resets=index + 1, episodes=kept.episodes + 1)
            else:
                with unseen_renders(context=False):  # the first reset replaces its simulation
                    self._env, made = OffScreenRenderEnv(
                        bddl_file_name=str(bddl),
                        camera_heights=IMAGE_SIZE,
                        camera_widths=IMAGE_SIZE,
                        horizon=horizon,
                        ignore_done=True,
                    ), 0
                self._env.seed(seed)
                self._kept = KeptEnvironment(self._env, self.entry.bddl_file, horizon,
                                             resets=index + 1, first_state=index, episodes=1)
            if full:
                kept_from = self._kept.first_state if self._kept.episodes > 1 else None
                self.identity["schedule"] = replay_resets(index, self.positioning_reset,
                                                          made=made, kept_from=kept_from)
            with unseen_renders(context=True):  # the case installs and settles before it looks
                self._env.reset()
        self._perturbation.on_scene()
        if self.render == "consumed":
            self._install_gates()
        self._perturbation.set_up(state)
        # The settled physics, hashed: a perturbation that must leave it alone is checked
        # against its twin's (camera, light, noise), and verify's re-execution reaches it.
        self.identity["settled_state_sha256"] = states_sha256(self._env.sim.get_state().flatten())
        self._perturbation.on_settled()
        if self._perturbation.record is not None:
            self.identity["perturbation"] = self._perturbation.record
        if self.monitor_safety:
            self.safety = SafetyProbe(self._env.env)  # baselines: the settled scene
        self.goals = GoalProbe(self._env.env, bddl)  # held_at_start: the settled scene

    def positioning_reset(self) -> None:
        """A native reset as full mode makes it before the episode's own (the cost probe
        times it too): the next reset replaces its simulation, so it opens no GL context."""
        with unseen_renders(context=False):
            self._env.reset()

    @property
    def env(self) -> Any:
        """LIBERO's environment, for the perturbation's hooks (perturb/kind.py ``Stage``)."""
        return self._env

    def install(self, state: np.ndarray) -> None:
        """The released init state: natively, or on the model a perturbation changed."""
        obs = self._perturbation.install(state)
        self._obs = dict(obs if obs is not None else self._env.set_init_state(state))

    def settle(self) -> None:
        """The settling controls; only the last one's images are seen (the first
        observation)."""
        settle = np.asarray(SETTLE_ACTION, dtype=np.float64)
        self.init_controls = 0
        for n in range(1, SETTLE_CONTROLS + 1):
            self._want(policy=n == SETTLE_CONTROLS, video=n == SETTLE_CONTROLS)
            self._obs, _, _, _ = self._env.step(settle)
            self.init_controls += 1

    def _install_gates(self) -> None:
        observables = self._env.env._observables
        for camera in CAMERAS:
            observable = observables[f"{camera}_image"]
            gate = RenderGate(observable._sensor, (IMAGE_SIZE, IMAGE_SIZE, 3))
            observable._sensor = gate
            self.gates[camera] = gate

    def _want(self, *, policy: bool, video: bool) -> None:
        for camera, gate in self.gates.items():
            gate.wanted = policy or (video and camera == "agentview")

    def renders(self) -> dict[str, int] | None:
        """Real renders per camera so far (None when every control renders)."""
        return {c: g.renders for c, g in self.gates.items()} if self.gates else None

    def observe(self, policy_calls: int, executed_controls: int) -> Observation:
        obs = self._obs
        images = {
            camera: np.ascontiguousarray(obs[f"{camera}_image"][::-1, ::-1]) for camera in CAMERAS
        }
        images = self._perturbation.deliver(images, policy_calls)  # copies; the simulator's stay
        return Observation(
            language=self.entry.language,
            images=images,
            proprio=self._proprio(),
            policy_calls=policy_calls,
            executed_controls=executed_controls,
        )

    def delay(self, policy_call: int, latency_s: float) -> int:
        """The delay of a reply in controls, as the case's perturbation says (0: none)."""
        return self._perturbation.delay(policy_call, latency_s)

    def frame(self) -> np.ndarray:
        return np.ascontiguousarray(self._obs["agentview_image"][::-1, ::-1])

    def scene(self) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
        """Every camera's image after the last control, rotated as delivered, before any
        delivery-moment perturbation, and the proprio vector on the rgb+proprio track
        (evidence level dataset). Only whole with ``render="all"``: a gated camera keeps
        its last rendered image."""
        if self.gates:
            raise EnvironmentFault("every control's images were asked for, but this episode "
                                   "renders only consumed images (render='consumed')")
        images = {camera: np.ascontiguousarray(self._obs[f"{camera}_image"][::-1, ::-1])
                  for camera in CAMERAS}
        return images, self._proprio()

    def _proprio(self) -> np.ndarray | None:
        """7 joint positions and 2 gripper encoders on the rgb+proprio track, else None."""
        if self.track != "rgb+proprio":
            return None
        obs = self._obs
        return np.concatenate([obs["robot0_joint_pos"], obs["robot0_gripper_qpos"]]).astype(np.float64)

    def step(self, action: np.ndarray, observe_next: bool = True) -> bool:
        """One control. ``observe_next``: the policy sees the images after it."""
        self.controls += 1
        self._want(policy=observe_next, video=self.controls % self.video_stride == 0)
        try:
            self._obs, _, done, _ = self._env.step(action)
        except BaseException:
            self._keep = None  # a simulator that raised mid-episode is not reused
            raise
        if self.safety is not None:
            self.safety.sample()
        if self.goals is not None:
            self.goals.sample(self.controls)
        return bool(done)

    def safety_signals(self) -> Signals | None:
        """The safety axis's raw signals so far (None with the monitor off)."""
        return None if self.safety is None else self.safety.signals()

    def goal_progress(self) -> ProgressRecord | None:
        """Each goal predicate's course so far (the record's ``progress``)."""
        return None if self.goals is None else self.goals.record()

    def close(self) -> None:
        env, self._env = self._env, None
        if env is None:
            return
        if self._keep is not None and self._kept is not None and self.entry.state is not None:
            self._keep(self._kept)
        else:
            env.close()

    def __enter__(self) -> LiberoEpisode:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class LiberoBenchmarkAdapter:
    """Registered as ``libero``: opens one native episode per case.

    Every episode's environment is built fresh, except as the case host's ``placement``
    says (full mode, docs/full-mode.md; ``catalog/placement.py``): an episode that
    continues opens in the environment held here, its task's earlier state's, and one
    the host may keep leaves its environment held here for the task's next state.
    """

    name = "libero"

    def __init__(self) -> None:
        self._kept: KeptEnvironment | None = None

    def open(
        self,
        entry: Entry,
        *,
        track: str,
        control_cap: int,
        render: str = "consumed",
        video_stride: int = 1,
        placement: Placement | None = None,
    ) -> LiberoEpisode:
        kept, self._kept = self._kept, None
        if kept is not None and (placement is None or not placement.continues):
            kept.env.close()
            kept = None
        keep = self._hold if placement is not None and placement.keep is not None else None
        return LiberoEpisode(entry, track=track, control_cap=control_cap, render=render,
                             video_stride=video_stride, kept=kept, keep=keep)

    def _hold(self, kept: KeptEnvironment) -> None:
        self._kept = kept

    def close(self) -> None:
        """Close a kept environment, if any."""
        kept, self._kept = self._kept, None
        if kept is not None:
            kept.env.close()
