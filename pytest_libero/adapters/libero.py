"""LiberoBenchmarkAdapter: the only code that imports the LIBERO simulator (P4-P8).

It builds a fresh native environment per episode, installs the released init state,
runs the settling controls, turns native observations into the protocol's
:class:`Observation` and reports LIBERO's own success after every control.

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

from pytest_libero.adapters.random_stream import replay_resets
from pytest_libero.adapters.safety_probe import SafetyProbe
from pytest_libero.adapters.scene_kinds import Environment, Position
from pytest_libero.catalog.entries import PARAPHRASE, Entry
from pytest_libero.catalog.inventory import installed_files, load_states, states_sha256
from pytest_libero.catalog.placement import Placement
from pytest_libero.perturb.appearance import recolour, task_objects
from pytest_libero.perturb.draw import Perturbation, draw, noise_generator
from pytest_libero.perturb.levels import NOISE_CAMERAS, ROBOT_REDRAWS, SCENE_REDRAWS
from pytest_libero.perturb.scene import (
    change_lights,
    corrupt,
    move_camera,
    offset_joints,
    robot_contacts,
)
from pytest_libero.perturb.semantic import paraphrase_record
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
        self._noise: Perturbation | None = None
        self._scene: Environment | None = None
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
        if kept is not None:
            self._env, made = kept.env, kept.resets
            kept.check(self.entry, horizon)
            self._kept = replace(kept, resets=index + 1, episodes=kept.episodes + 1)
        else:
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
            self.identity["schedule"] = replay_resets(index, self._env.reset, made=made,
                                                      kept_from=kept_from)
        self._env.reset()
        self._perturb("reset")
        if self.render == "consumed":
            self._install_gates()
        perturbation = self.entry.perturbation
        if perturbation is not None and self._scene_kind() is not None:
            self._settle_scene(state, perturbation.kind, perturbation.level)  # installs per draw
        else:
            self._obs = self._install(state)
            self._perturb("init_state")
            self._settle()
        # The settled physics, hashed: a perturbation that must leave it alone is checked
        # against its twin's (camera, light, noise), and verify's re-execution reaches it.
        self.identity["settled_state_sha256"] = states_sha256(self._env.sim.get_state().flatten())
        self._perturb("settled")
        if self.monitor_safety:
            self.safety = SafetyProbe(self._env.env)  # baselines: the settled scene

    def _settle(self) -> None:
        """The settling controls; only the last one's images are seen (the first
        observation)."""
        settle = np.asarray(SETTLE_ACTION, dtype=np.float64)
        self.init_controls = 0
        for n in range(1, SETTLE_CONTROLS + 1):
            self._want(policy=n == SETTLE_CONTROLS, video=n == SETTLE_CONTROLS)
            self._obs, _, _, _ = self._env.step(settle)
            self.init_controls += 1

    def _scene_kind(self) -> str | None:
        """The entry's perturbation when it moves or adds objects (judged after settling)."""
        perturbation = self.entry.perturbation
        return perturbation.kind if perturbation is not None and perturbation.kind in (
            "position", "environment") else None

    def _settle_scene(self, state: np.ndarray, kind: str, level: int) -> None:
        """Position and environment: draw, apply, settle and judge; a rejected draw is
        drawn again, deterministically (the next attempt), from the init state installed
        anew, and every rejection is recorded (docs/perturbations.md)."""
        scene: Position | Environment
        if kind == "environment":
            assert isinstance(self._scene, Environment)
            scene = self._scene
        else:
            scene = Position(self._env)
        # The scene settled unperturbed, once: where each object comes to rest (the init
        # states hold objects a little above the table) and what touches already.
        self._obs = self._install(state)
        self._settle()
        scene.reference()
        rejected: list[list[str]] = []
        for attempt in range(SCENE_REDRAWS + 1):
            self._obs = self._install(state)
            drawn = draw(kind, level, self._twin_case(), attempt, scene.context())
            problems = scene.apply(drawn)
            if not problems:
                self._settle()
                problems = scene.judge(bool(self._env.check_success()))
            if not problems:
                self.identity["perturbation"] = {**drawn.as_dict(), "rejected": rejected,
                                                 **scene.record()}
                return
            rejected.append(problems[:4])
        raise EnvironmentFault(
            f"{self.entry.case_id}: every one of {SCENE_REDRAWS + 1} draws was rejected "
            f"(the last: {'; '.join(rejected[-1])}); this task has no room for {kind} "
            f"level {level}"
        )

    def _install(self, state: np.ndarray) -> dict[str, Any]:
        """The released init state: natively, or on a model with distractors added."""
        if isinstance(self._scene, Environment):
            return dict(self._scene.install(state))
        return dict(self._env.set_init_state(state))

    def _perturb(self, after: str) -> None:
        """The entry's generated perturbation, each kind at its moment: camera, light and
        object look after the reset (a hard reset recompiles the model), the instruction
        (semantic, a paraphrase companion) recorded there too, the robot offset and the
        noise's draw after the init state, the robot's contacts once settled."""
        perturbation = self.entry.perturbation
        if after == "reset" and self.entry.ood is not None and self.entry.ood.kind == PARAPHRASE:
            self.identity["perturbation"] = paraphrase_record(self.entry)
        if perturbation is None:
            return
        kind, level = perturbation.kind, perturbation.level
        if after == "reset" and kind in ("camera", "light", "object"):
            self._perturb_model(kind, level)
        elif after == "reset" and kind == "environment":
            self._scene = Environment(self._env, level, self._twin_case())
            self._scene.build()
        elif after == "reset" and kind == "semantic":  # the instruction only (entry.language)
            self.identity["perturbation"] = {
                **draw(kind, level, self._twin_case()).as_dict(),
                "applied": {"instruction_sent": self.entry.language}}
        elif after == "init_state" and kind == "robot":
            self._offset_robot(level)
        elif after == "init_state" and kind == "noise":
            self._noise = draw("noise", level, self._twin_case())
            self.identity["perturbation"] = self._noise.as_dict()
        elif after == "settled" and kind == "robot":
            self.identity["perturbation"]["contacts_at_first_observation"] = robot_contacts(
                self._env.sim)
        elif after == "settled" and kind in ("position", "environment"):
            self.identity["perturbation"]["robot_contacts_at_first_observation"] = (
                robot_contacts(self._env.sim))

    def _twin_case(self) -> str:
        """The unperturbed case's id: what every draw of this perturbation is seeded by."""
        return str(self.entry.twin)

    def _perturb_model(self, kind: str, level: int) -> None:
        """Move the agentview camera or change the lights (docs/perturbations.md)."""
        drawn = draw(kind, level, self._twin_case())
        if kind == "object":
            applied = recolour(self._env.sim, task_objects(self._env.env), drawn.parameters)
        else:
            applied = (move_camera if kind == "camera" else change_lights)(self._env.sim, drawn)
        self.identity["perturbation"] = {**drawn.as_dict(), "applied": applied}

    def _offset_robot(self, level: int) -> None:
        """Offset the arm's start joints; a draw that touches anything is drawn again,
        deterministically (the next attempt's seed), and the redraws are recorded."""
        robot = self._env.env.robots[0]
        touched: list[list[str]] = []
        for attempt in range(ROBOT_REDRAWS + 1):
            drawn = draw("robot", level, self._twin_case(), attempt)
            contacts = offset_joints(self._env.sim, robot._ref_joint_pos_indexes, drawn)
            if not contacts:
                # The controller's rest posture (its null-space target) moves with the arm,
                # or the settling controls would pull the offset back.
                controller = robot.controller
                controller.update_initial_joints(
                    np.asarray(controller.initial_joint) + drawn.parameters["joint_offsets_rad"])
                self.identity["perturbation"] = {**drawn.as_dict(), "touched": touched}
                return
            touched.append(contacts[:3])
        raise EnvironmentFault(
            f"{self.entry.case_id}: every one of {ROBOT_REDRAWS + 1} drawn joint offsets puts "
            f"the arm in contact ({touched[-1]}); this task has no room for robot level {level}"
        )

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
        if self._noise is not None:  # the delivered copies only; the simulator is untouched
            rng = noise_generator(self._noise, policy_calls)
            images = {camera: corrupt(image, self._noise, rng) if camera in NOISE_CAMERAS
                      else image for camera, image in images.items()}
        proprio = None
        if self.track == "rgb+proprio":
            proprio = np.concatenate(
                [obs["robot0_joint_pos"], obs["robot0_gripper_qpos"]]
            ).astype(np.float64)
        return Observation(
            language=self.entry.language,
            images=images,
            proprio=proprio,
            policy_calls=policy_calls,
            executed_controls=executed_controls,
        )

    def frame(self) -> np.ndarray:
        return np.ascontiguousarray(self._obs["agentview_image"][::-1, ::-1])

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
        return bool(done)

    def safety_signals(self) -> Signals | None:
        """The safety axis's raw signals so far (None with the monitor off)."""
        return None if self.safety is None else self.safety.signals()

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
