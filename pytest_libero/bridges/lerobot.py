"""Serve a LeRobot policy of any type from a local checkpoint folder (docs/lerobot.md).

    python -m pytest_libero.serve --policy pytest_libero.bridges.lerobot:make \\
        --option path=/ckpt/pretrained_model --port 8000

Run it in the LeRobot environment: lerobot and torch are imported inside :func:`make`
only, never by pytest-libero itself. Everything the bridge decides (which camera feeds
which image key, whether the checkpoint's state is the protocol's proprio, what it
refuses) is plain Python over the checkpoint's ``config.json``, decided before torch
is imported, so a checkpoint the protocol cannot feed is refused at start-up, in
seconds, with the fix in the message.

Per request the bridge does what LeRobot's own evaluation loop does: images as float
CHW tensors in [0, 1], the saved preprocessor (normalization, tokenizer, device), then
``select_action`` ``n_action_steps`` times (the queue a chunking policy would execute)
and the saved postprocessor on each action; the reply is that chunk.

A checkpoint whose ``observation.state`` is LeRobot's LIBERO 8-value end-effector state
is refused unless the operator opts in with ``--option state=mean``: then every request
feeds that key the dataset mean from the checkpoint's own normalization statistics, so
after the preprocessor the model sees the normalized mean, what it would see for an
average pose. The metadata says so (``pytest_libero/state_fed = "constant"``), and so
does every record of the run.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import metadata as package_metadata
from pathlib import Path
from typing import Any, TextIO

import numpy as np

from pytest_libero.files import json_text
from pytest_libero.policy.contract import STATE_FED_METADATA, Observation
from pytest_libero.protocol.hashing import array_sha256, sha256_file
from pytest_libero.protocol.parameters import ACTION_DIM, CAMERAS

log = logging.getLogger("pytest_libero.bridges.lerobot")

CONFIG_NAME = "config.json"
WEIGHTS_NAME = "model.safetensors"
PREPROCESSOR_NAME = "policy_preprocessor.json"
POSTPROCESSOR_NAME = "policy_postprocessor.json"
STATE_KEY = "observation.state"
PROPRIO_SIZE = 9
EEF_STATE_SIZE = 8
"""LeRobot's LIBERO datasets: end-effector position, axis-angle, 2 gripper encoders."""
STATE_MODES = ("mean",)
"""``--option state=...``: what to feed a state the protocol never sends."""
AGENTVIEW, EYE_IN_HAND = CAMERAS
WRIST_WORDS = ("wrist", "hand", "eye", "gripper")
"""A camera key whose last part holds one of these, or is ``image2`` (LeRobot's LIBERO
name for the wrist camera), is the eye-in-hand camera."""
PADDED_WORDS = ("empty_camera",)
"""Image keys a policy fills itself when absent (SmolVLA's ``empty_cameras``)."""
PROPRIO_TRACK = "--libero-track=rgb+proprio"
OFFLINE_VARIABLES = ("HF_HUB_OFFLINE", "HF_DATASETS_OFFLINE", "TRANSFORMERS_OFFLINE")


class BridgeRefused(ValueError):
    """The checkpoint, an option or a request cannot be served as asked; the message
    names the thing and the fix. A ValueError, so ``pytest_libero.serve`` reports a
    refusal at start-up as a rejected option (exit 2) rather than a traceback."""


@dataclass(frozen=True)
class Feature:
    """One entry of a LeRobot config's ``input_features``/``output_features``."""

    kind: str
    shape: tuple[int, ...]


@dataclass(frozen=True)
class InputPlan:
    """What each request becomes: camera per image key, the state key, the padded keys."""

    images: Mapping[str, str]
    state: str | None
    padded: tuple[str, ...] = ()
    state_source: str = "proprio"
    """Where the state comes from: "proprio" (the request), or "mean" (state=mean)."""

    def describe(self) -> dict[str, Any]:
        inputs: dict[str, str] = {key: f"image:{camera}" for key, camera in self.images.items()}
        if self.state is not None:
            inputs[self.state] = self.state_source
        inputs["task"] = "language"
        return {"inputs": inputs, "padded_by_policy": list(self.padded)}


def checkpoint_folder(path: object) -> Path:
    """The folder holding the checkpoint's config, weights and processors.

    Only a local directory is accepted, never a hub id: an evaluation must not depend
    on what a hub serves that day. A training step folder (``checkpoints/last``) is
    accepted for the ``pretrained_model`` folder inside it.
    """
    if path is None or str(path).strip() == "":
        raise BridgeRefused(
            "no checkpoint given; pass the local folder of a LeRobot checkpoint with "
            "--option path=/ckpt (the pretrained_model folder lerobot-train saves)")
    folder = Path(str(path)).expanduser()
    if not folder.is_dir():
        raise BridgeRefused(
            f"path={path}: not an existing directory; give path= a local folder holding a "
            f"LeRobot checkpoint ({CONFIG_NAME}, {WEIGHTS_NAME}, {PREPROCESSOR_NAME}), e.g. "
            "outputs/train/<run>/checkpoints/last/pretrained_model; the bridge never "
            "downloads from a hub, so download it first (huggingface-cli download REPO "
            "--local-dir DIR) if it is a hub id")
    if not (folder / CONFIG_NAME).is_file() and (folder / "pretrained_model" / CONFIG_NAME).is_file():
        folder = folder / "pretrained_model"
    missing = [name for name in (CONFIG_NAME, WEIGHTS_NAME, PREPROCESSOR_NAME, POSTPROCESSOR_NAME)
               if not (folder / name).is_file()]
    if missing:
        raise BridgeRefused(
            f"path={path}: the folder {folder} lacks {missing}; a LeRobot (>= 0.4) checkpoint "
            "keeps its policy config, weights and pre/post-processors side by side (what "
            "lerobot-train saves as pretrained_model); a checkpoint saved before processors "
            "existed converts with python -m lerobot.processor.migrate_policy_normalization")
    return folder.resolve()


def read_config(folder: Path) -> dict[str, Any]:
    """The checkpoint's ``config.json`` as JSON, read without lerobot."""
    try:
        config = json.loads((folder / CONFIG_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise BridgeRefused(f"{folder / CONFIG_NAME}: not readable JSON ({exc}); give path= "
                            "a LeRobot checkpoint folder") from exc
    if not isinstance(config, dict) or not isinstance(config.get("type"), str):
        raise BridgeRefused(f"{folder / CONFIG_NAME}: no policy 'type'; this is not a LeRobot "
                            "policy config (give path= the pretrained_model folder)")
    return config


def features(config: Mapping[str, Any], which: str) -> dict[str, Feature]:
    """``input_features`` or ``output_features`` of a config.json, as :class:`Feature`."""
    raw = config.get(which) or {}
    if not isinstance(raw, Mapping):
        raise BridgeRefused(f"the checkpoint's {which} is a {type(raw).__name__}, not a map")
    found: dict[str, Feature] = {}
    for key, entry in raw.items():
        kind = entry.get("type") if isinstance(entry, Mapping) else None
        shape = entry.get("shape") if isinstance(entry, Mapping) else None
        if not isinstance(kind, str) or not isinstance(shape, list | tuple):
            raise BridgeRefused(f"the checkpoint's {which}[{key!r}] is {entry!r}; expected "
                                "{'type': ..., 'shape': [...]}")
        found[str(key)] = Feature(kind.upper(), tuple(int(n) for n in shape))
    return found


def parse_image_keys(text: object) -> dict[str, str]:
    """``KEY:CAMERA,KEY:CAMERA`` (the ``image_keys`` option) as {feature key: camera}."""
    if text is None or str(text).strip() == "":
        return {}
    mapping: dict[str, str] = {}
    for item in str(text).split(","):
        key, sep, camera = item.strip().rpartition(":")
        if not sep or not key or camera not in CAMERAS:
            raise BridgeRefused(
                f"image_keys={text}: {item!r} is not KEY:CAMERA with CAMERA one of "
                f"{list(CAMERAS)}; write e.g. image_keys=observation.images.front:{AGENTVIEW},"
                f"observation.images.wrist:{EYE_IN_HAND}")
        mapping[key] = camera
    return mapping


def camera_for(key: str) -> str | None:
    """The default camera of an image key: eye-in-hand by name, else None (agentview
    when it is the only one left)."""
    name = key.rsplit(".", 1)[-1].lower()
    if name == "image2" or any(word in name for word in WRIST_WORDS):
        return EYE_IN_HAND
    return None


def plan_inputs(inputs: Mapping[str, Feature], outputs: Mapping[str, Feature],
                image_keys: Mapping[str, str] | None = None,
                state_mode: str | None = None) -> InputPlan:
    """Map the checkpoint's inputs onto what the protocol sends, or refuse at start-up.

    Images: ``image_keys`` first; then a wrist-like name is the eye-in-hand camera and
    the one remaining key is agentview. ``observation.state`` must be the 9-value
    proprio vector. Anything else the checkpoint needs (an end-effector state, an
    environment state, a third camera) the protocol never sends: refused; but with
    ``state_mode="mean"`` an 8-value end-effector ``observation.state`` is fed the
    dataset mean (opt-in, recorded).
    """
    if state_mode is not None and state_mode not in STATE_MODES:
        raise BridgeRefused(f"state={state_mode}: not a state mode; the one mode is state=mean "
                            "(feed an 8-value end-effector state its dataset mean)")
    explicit = dict(image_keys or {})
    unknown = sorted(set(explicit) - {k for k, f in inputs.items() if f.kind == "VISUAL"})
    if unknown:
        raise BridgeRefused(
            f"image_keys names {unknown}, which are not image inputs of the checkpoint; its "
            f"image inputs are {sorted(k for k, f in inputs.items() if f.kind == 'VISUAL')}")
    images: dict[str, str] = {}
    padded: list[str] = []
    unmapped: list[str] = []
    state: str | None = None
    source = "proprio"
    for key, feature in inputs.items():
        if feature.kind == "VISUAL":
            if len(feature.shape) != 3 or feature.shape[0] != 3:
                raise BridgeRefused(
                    f"the checkpoint's image input {key!r} has shape {list(feature.shape)}; the "
                    "protocol sends RGB images (3, 256, 256) only")
            if key in explicit:
                images[key] = explicit[key]
            elif any(word in key for word in PADDED_WORDS):
                padded.append(key)
            elif camera_for(key) is not None:
                images[key] = EYE_IN_HAND
            else:
                unmapped.append(key)
        elif feature.kind == "STATE":
            if state_mode == "mean" and key == STATE_KEY and feature.shape == (EEF_STATE_SIZE,):
                state, source = key, "mean"
            else:
                state = _state_key(key, feature, state_mode)
        elif feature.kind == "LANGUAGE":
            continue  # tokens: the preprocessor makes them from the task string
        else:
            raise BridgeRefused(
                f"the checkpoint needs {key!r} ({feature.kind}, shape {list(feature.shape)}), "
                "which the protocol never sends: policies see the two cameras, the "
                f"instruction and, on {PROPRIO_TRACK}, the 9 joint/gripper encoders; "
                "retrain or convert the checkpoint without it")
    if len(unmapped) == 1 and AGENTVIEW not in images.values():
        images[unmapped[0]] = AGENTVIEW
    elif unmapped:
        raise BridgeRefused(
            f"cannot tell which camera feeds the checkpoint's image input(s) {unmapped} "
            f"(already mapped: {images}); name them with --option image_keys=KEY:{AGENTVIEW},"
            f"KEY:{EYE_IN_HAND}")
    taken = list(images.values())
    if len(set(taken)) != len(taken) and not explicit:
        raise BridgeRefused(
            f"two image inputs map to one camera ({images}); name each with --option "
            f"image_keys=KEY:{AGENTVIEW},KEY:{EYE_IN_HAND}")
    _check_action(outputs)
    ordered = {key: images[key] for key in inputs if key in images}  # the checkpoint's order
    return InputPlan(images=ordered, state=state, padded=tuple(padded), state_source=source)


def _state_key(key: str, feature: Feature, state_mode: str | None = None) -> str:
    if key == STATE_KEY and feature.shape == (PROPRIO_SIZE,) and state_mode is None:
        return key
    size = int(np.prod(feature.shape)) if feature.shape else 0
    eef = key == STATE_KEY and size == EEF_STATE_SIZE
    hint = (" (LeRobot's LIBERO datasets use 8: end-effector position, axis-angle and the "
            "2 gripper encoders)" if eef else "")
    opt_in = (" Or opt in to --option state=mean: every request then feeds the dataset mean "
              "from the checkpoint's normalization statistics (the model sees an average "
              "pose, recorded as a constant state; not the published evaluation)." if eef else "")
    if state_mode == "mean" and not eef:
        raise BridgeRefused(f"state=mean feeds an 8-value end-effector {STATE_KEY}; the "
                            f"checkpoint's {key!r} has shape {list(feature.shape)}; drop "
                            "state=mean")
    raise BridgeRefused(
        f"the checkpoint's {key!r} is a state of shape {list(feature.shape)}{hint}; the "
        f"protocol sends only the proprio vector on {PROPRIO_TRACK} (track = \"rgb+proprio\" "
        "in the profile): 9 values, 7 arm joint positions then 2 gripper encoders, and no "
        "end-effector state; serve a checkpoint trained on that 9-value "
        f"{STATE_KEY}, or one without a state on the rgb track (retrain or convert it)."
        + opt_in)


def state_mean(preprocessor: Any, key: str = STATE_KEY) -> np.ndarray:
    """The dataset mean of ``key`` from the normalization statistics a saved LeRobot
    preprocessor carries, as float32: its normalizer step's tensors (what a saved
    pipeline loads its statistics into), else the ``stats`` it was built with."""
    for step in getattr(preprocessor, "steps", []):
        for name in ("_tensor_stats", "stats"):
            stats = getattr(step, name, None)
            if isinstance(stats, Mapping) and isinstance(stats.get(key), Mapping) \
                    and stats[key].get("mean") is not None:
                return _numpy(stats[key]["mean"]).astype(np.float32).reshape(-1)
    raise BridgeRefused(
        f"state=mean: the checkpoint's preprocessor keeps no mean for {key} (no normalizer "
        "step with statistics for it); drop state=mean, or serve a checkpoint saved with "
        "its normalization statistics")


def _check_action(outputs: Mapping[str, Feature]) -> None:
    action = outputs.get("action")
    if action is None or action.shape != (ACTION_DIM,):
        found = None if action is None else list(action.shape)
        raise BridgeRefused(
            f"the checkpoint's action output has shape {found}; the protocol executes "
            f"({ACTION_DIM},) actions: 3 translation, 3 rotation, 1 gripper, in OSC_POSE's "
            "normalized [-1, 1] (LIBERO's own action space); retrain or convert the checkpoint")


def request_arrays(observation: Observation, plan: InputPlan,
                   mean: np.ndarray | None = None) -> dict[str, Any]:
    """The batch of one request as numpy: (1, 3, H, W) float32 images in [0, 1], the
    (1, 9) float32 state, and the task; what LeRobot's ``preprocess_observation`` gives.

    The protocol's images are already rotated by 180 degrees, as LeRobot's
    LiberoProcessorStep rotates them, so they pass as they are. A plan whose state
    comes from the mean (state=mean) feeds ``mean`` whatever the request holds.
    """
    batch: dict[str, Any] = {}
    for key, camera in plan.images.items():
        image = np.asarray(observation.images[camera])
        if image.dtype != np.uint8 or image.ndim != 3 or image.shape[2] != 3:
            raise BridgeRefused(f"{camera} image has dtype {image.dtype} shape {image.shape}; "
                                "expected uint8 (H, W, 3)")
        batch[key] = (np.ascontiguousarray(image.transpose(2, 0, 1))[None].astype(np.float32)
                      / np.float32(255))
    if plan.state is not None and plan.state_source == "mean":
        if mean is None or mean.shape != (EEF_STATE_SIZE,):
            raise BridgeRefused(f"state=mean needs the {EEF_STATE_SIZE}-value dataset mean of "
                                f"{plan.state}; got {None if mean is None else mean.shape}")
        batch[plan.state] = mean[None].astype(np.float32)
    elif plan.state is not None:
        if observation.proprio is None:
            raise BridgeRefused(
                f"the checkpoint needs {plan.state} (the 9 joint/gripper encoders) but this "
                f"request has no proprio: the run is on the rgb track; run it with "
                f"{PROPRIO_TRACK} (or track = \"rgb+proprio\" in the profile)")
        proprio = np.asarray(observation.proprio, dtype=np.float64).reshape(-1)
        if proprio.shape != (PROPRIO_SIZE,):
            raise BridgeRefused(f"proprio has {proprio.size} values; the protocol sends "
                                f"{PROPRIO_SIZE}")
        batch[plan.state] = proprio[None].astype(np.float32)
    batch["task"] = [observation.language]
    return batch


def describe_request(observation: Observation, plan: InputPlan, batch: Mapping[str, Any],
                     preprocessed: Mapping[str, Any]) -> dict[str, Any]:
    """One ``request`` line of the record: what each input key received, and from what."""
    inputs: dict[str, Any] = {}
    for key, camera in plan.images.items():
        inputs[key] = {**_summary(batch[key]), "camera": camera,
                       "source_sha256": array_sha256(np.asarray(observation.images[camera]))}
    line: dict[str, Any] = {"event": "request", "task": batch["task"][0], "inputs": inputs,
                            "policy_calls": observation.policy_calls,
                            "executed_controls": observation.executed_controls}
    if plan.state is not None and plan.state_source == "mean":
        line["state"] = {**_summary(batch[plan.state]), "key": plan.state, "source": "mean",
                         "values": batch[plan.state][0].tolist()}
    elif plan.state is not None and observation.proprio is not None:
        proprio = np.asarray(observation.proprio, dtype=np.float64)
        line["state"] = {**_summary(batch[plan.state]), "key": plan.state,
                         "values": batch[plan.state][0].tolist(),
                         "source_sha256": array_sha256(proprio)}
    line["preprocessed"] = {key: _summary(value) for key, value in preprocessed.items()
                            if isinstance(value, np.ndarray)}
    if plan.state is not None and isinstance(preprocessed.get(plan.state), np.ndarray):
        line["preprocessed"][plan.state]["values"] = preprocessed[plan.state].reshape(-1).tolist()
    return line


def _summary(array: np.ndarray) -> dict[str, Any]:
    return {"shape": list(array.shape[1:]), "batch": int(array.shape[0]), "dtype": str(array.dtype),
            "min": float(array.min()), "max": float(array.max())}


class Record:
    """The ``record=PATH`` JSONL: a line per load, episode reset and request, flushed
    as written, so a test (or a person) sees exactly what the checkpoint was fed."""

    def __init__(self, path: object) -> None:
        self.path = Path(str(path))
        self._stream: TextIO | None = self.path.open("a", encoding="utf-8")

    def write(self, line: Mapping[str, Any]) -> None:
        if self._stream is not None:
            self._stream.write(json_text(line) + "\n")
            self._stream.flush()

    def close(self) -> None:
        if self._stream is not None:
            self._stream.close()
            self._stream = None


@dataclass
class _Loaded:
    """One checkpoint in memory, shared by every episode object the server builds."""

    key: tuple[str, ...]
    policy: Any
    preprocessor: Any
    postprocessor: Any
    plan: InputPlan
    steps: int
    stateful: bool
    metadata: dict[str, Any]
    record: Record | None
    users: int = 0
    mean: np.ndarray | None = None
    """state=mean: the dataset mean fed as the state."""


_LOADED: dict[tuple[str, ...], _Loaded] = {}


class LeRobotBridge:
    """One episode's view of a loaded LeRobot policy (the server builds one per
    concurrent connection; they share the weights)."""

    def __init__(self, loaded: _Loaded) -> None:
        self._loaded = loaded
        self.number = loaded.users
        self.metadata: dict[str, Any] = loaded.metadata

    def reset(self) -> None:
        """A new episode: the policy's action and observation queues start empty."""
        self._loaded.policy.reset()
        if self._loaded.record is not None:
            self._loaded.record.write({"event": "reset", "bridge": self.number})

    def infer(self, observation: Observation) -> dict[str, Any]:
        import torch

        loaded = self._loaded
        batch = request_arrays(observation, loaded.plan, loaded.mean)
        tensors = {k: torch.from_numpy(v) if isinstance(v, np.ndarray) else v for k, v in batch.items()}
        with torch.inference_mode():
            prepared = loaded.preprocessor(tensors)
            actions = [loaded.postprocessor(loaded.policy.select_action(prepared))
                       for _ in range(loaded.steps)]
        steps = [_numpy(action) for action in actions]
        chunk = np.concatenate([step.reshape(-1, step.shape[-1]) for step in steps]).astype(np.float64)
        if chunk.ndim != 2 or chunk.shape[1] != ACTION_DIM:
            raise BridgeRefused(f"the postprocessed actions have shape {chunk.shape}; the "
                                f"protocol needs (H, {ACTION_DIM})")
        if loaded.record is not None:
            line = describe_request(observation, loaded.plan, batch,
                                    {k: _numpy(v) for k, v in prepared.items() if hasattr(v, "shape")})
            line.update(bridge=self.number, chunk={"shape": list(chunk.shape),
                                                   "sha256": array_sha256(chunk)})
            loaded.record.write(line)
        return {"actions": chunk}

    def close(self) -> None:
        loaded = self._loaded
        loaded.users -= 1
        if loaded.users <= 0 and _LOADED.get(loaded.key) is loaded:
            del _LOADED[loaded.key]
            if loaded.record is not None:
                loaded.record.close()


def _numpy(value: Any) -> np.ndarray:
    if hasattr(value, "detach"):
        return np.asarray(value.detach().to("cpu").float().numpy())
    return np.asarray(value)


def make(path: str | None = None, device: str = "cpu", image_keys: str | None = None,
         record: str | None = None, state: str | None = None) -> LeRobotBridge:
    """The serving factory: ``--option path=DIR [device=cuda] [image_keys=K:CAM,...]
    [record=FILE.jsonl] [state=mean]``.

    The first call loads the checkpoint; later calls (more concurrent episodes than
    objects) share it. A policy that keeps an observation history or a temporal
    ensemble between calls cannot be shared between concurrent episodes, so a second
    concurrent object is refused for it.
    """
    folder = checkpoint_folder(path)
    config = read_config(folder)
    plan = plan_inputs(features(config, "input_features"), features(config, "output_features"),
                       parse_image_keys(image_keys), state)
    key = (str(folder), str(device), str(image_keys or ""), str(record or ""), str(state or ""))
    loaded = _LOADED.get(key)
    if loaded is None:
        loaded = _load(key, folder, str(device), plan, config,
                       None if not record else Record(record))
        _LOADED[key] = loaded
    elif loaded.stateful:
        raise BridgeRefused(
            f"the {config['type']} checkpoint keeps an observation history or a temporal "
            "ensemble between calls, so concurrent episodes cannot share one loaded copy; "
            "run the plugin without -n against this server, or one server per worker")
    loaded.users += 1
    return LeRobotBridge(loaded)


def _offline() -> None:
    """No hub, ever: huggingface_hub reads these when first imported; patch it if it is."""
    for name in OFFLINE_VARIABLES:
        os.environ[name] = "1"
    constants = sys.modules.get("huggingface_hub.constants")
    if constants is not None:
        setattr(constants, "HF_HUB_OFFLINE", True)  # noqa: B010 (a module, not a typed object)


def _load(key: tuple[str, ...], folder: Path, device: str, plan: InputPlan,
          raw: Mapping[str, Any], record: Record | None) -> _Loaded:
    _offline()
    try:
        import torch
        from lerobot.configs.policies import PreTrainedConfig
        from lerobot.policies.factory import get_policy_class, make_pre_post_processors
    except ImportError as exc:
        raise BridgeRefused(
            f"lerobot is not importable by {sys.executable} ({exc}); run the bridge with the "
            "Python of the environment that has lerobot and its torch (pip install lerobot "
            "pytest-libero there), not pytest-libero's own") from exc
    try:
        config = PreTrainedConfig.from_pretrained(str(folder), local_files_only=True)
        config.device = device
        config.pretrained_path = folder
        policy = get_policy_class(config.type).from_pretrained(
            str(folder), config=config, local_files_only=True)
        policy.to(device)
        policy.eval()
        overrides = {"device_processor": {"device": device}} if _has_step(folder) else {}
        preprocessor, postprocessor = make_pre_post_processors(
            config, pretrained_path=str(folder), preprocessor_overrides=overrides)
    except Exception as exc:
        log.exception("loading the LeRobot checkpoint %s failed", folder)
        raise BridgeRefused(
            f"path={folder}: lerobot could not load this checkpoint ({type(exc).__name__}: {exc}); "
            "the bridge runs offline (HF_HUB_OFFLINE=1), so whatever the checkpoint names by "
            "hub id (SmolVLA's VLM config and tokenizer, say) must already be in the local "
            "Hugging Face cache (HF_HOME) of this environment") from exc
    mean = state_mean(preprocessor, plan.state) if plan.state_source == "mean" and plan.state else None
    steps = int(getattr(config, "n_action_steps", 1) or 1)
    stateful = (int(getattr(config, "n_obs_steps", 1) or 1) > 1
                or getattr(config, "temporal_ensemble_coeff", None) is not None)
    info: dict[str, Any] = {
        "type": str(config.type),
        "checkpoint": str(folder),
        "config_sha256": sha256_file(folder / CONFIG_NAME),
        "weights_bytes": (folder / WEIGHTS_NAME).stat().st_size,
        "n_action_steps": steps,
        "device": device,
        "versions": {"lerobot": package_metadata.version("lerobot"), "torch": torch.__version__},
        **plan.describe(),
    }
    if mean is not None:
        info["state_mean"] = mean.tolist()
    metadata: dict[str, Any] = {"policy": "lerobot", "lerobot": info}
    if mean is not None:
        metadata[STATE_FED_METADATA] = "constant"
    log.info("LeRobot %s from %s: %s, %d actions per reply", config.type, folder,
             plan.describe()["inputs"], steps)
    if record is not None:
        record.write({"event": "load", **info, "stateful": stateful,
                      "chunk_size": raw.get("chunk_size")})
    return _Loaded(key=key, policy=policy, preprocessor=preprocessor, postprocessor=postprocessor,
                   plan=plan, steps=steps, stateful=stateful, metadata=metadata, record=record,
                   mean=mean)


def _has_step(folder: Path, name: str = "device_processor") -> bool:
    """Whether the saved preprocessor has the step an override would target (lerobot
    refuses overrides that match no step)."""
    try:
        saved = json.loads((folder / PREPROCESSOR_NAME).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return False
    return any(isinstance(step, Mapping) and step.get("registry_name") == name
               for step in saved.get("steps", []))
