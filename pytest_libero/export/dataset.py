"""Writing an export plan as a LeRobotDataset (format v3) through lerobot's own API.

``LeRobotDataset.create``, ``add_frame``, ``save_episode`` and ``finalize`` write every
file of the format; nothing here writes one by hand. Images are kept as PNG by default,
so every pixel is the delivered one; ``videos=True`` lets lerobot encode them as video
instead, and the dataset is read back to say how far the video is from the delivered
images (PSNR). lerobot (and torch) are imported only here, only when asked for, and
never reach a hub: the dataset is written to a local folder and read from it.
"""

from __future__ import annotations

import math
import os
import shutil
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pytest_libero.evidence.controls import read_control_frames
from pytest_libero.evidence.layout import EvidenceError
from pytest_libero.evidence.reader import read_observations
from pytest_libero.export.episodes import COPY_CASE, EpisodePlan, ExportPlan, Layout, episode_metadata
from pytest_libero.files import write_json_atomic
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.parameters import CONTROL_FREQ_HZ

INSTALL = "pytest-libero export --lerobot needs lerobot: pip install 'pytest-libero[lerobot]'"
FORMAT = "pytest-libero-lerobot-export/2"
"""2: frames at their simulated time (a layout per run); 1 put decision frames 1/20 s apart."""
METADATA_PATH = Path("meta") / "pytest_libero.json"
"""Beside lerobot's own files: the run, each episode's case and the skipped cases."""
CAMERA_KEYS = {"agentview": "observation.images.image",
               "robot0_eye_in_hand": "observation.images.image2"}
"""LeRobot's own LIBERO names (its LIBERO environment and checkpoints use them)."""
ACTION_NAMES = ["x", "y", "z", "roll", "pitch", "yaw", "gripper"]
PROPRIO_NAMES = [*(f"joint_pos_{i}" for i in range(7)), "gripper_qpos_0", "gripper_qpos_1"]


class MissingLerobot(Exception):
    """lerobot is not installed here."""


@dataclass
class Written:
    """What an export wrote."""

    out: Path
    repo_id: str
    episodes: int
    frames: int
    psnr_db: dict[str, dict[str, float | None]] = field(default_factory=dict)
    """videos only: camera -> ``overall`` (from the mean squared error over every frame)
    and ``lowest`` (the worst frame's), in dB; None where the video is exact."""


def camera_key(camera: str) -> str:
    return CAMERA_KEYS.get(camera, f"observation.images.{camera}")


def _lerobot() -> Any:
    """lerobot's dataset class, imported now; offline, without progress bars."""
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
    try:
        from lerobot.datasets.lerobot_dataset import LeRobotDataset
    except ImportError as exc:
        raise MissingLerobot(INSTALL) from exc
    return LeRobotDataset


def features(first: tuple[dict[str, np.ndarray], np.ndarray | None], videos: bool,
             layout: Layout) -> dict[str, Any]:
    """The dataset's features, from the first frame's images and proprio: one action a
    frame, or in the decisions layout the K actions run from it and how many ran."""
    images, proprio = first
    found: dict[str, Any] = {
        camera_key(camera): {"dtype": "video" if videos else "image", "shape": tuple(image.shape),
                             "names": ["height", "width", "channels"]}
        for camera, image in sorted(images.items())}
    if proprio is not None:
        found["observation.state"] = {"dtype": "float32", "shape": tuple(proprio.shape),
                                      "names": PROPRIO_NAMES if proprio.shape == (9,) else None}
    if layout.every_control:
        found["action"] = {"dtype": "float32", "shape": (7,), "names": ACTION_NAMES}
    else:
        found["action"] = {"dtype": "float32", "shape": (layout.interval, 7), "names": None}
        found["actions_ran"] = {"dtype": "int64", "shape": (1,), "names": None}
    for flag in ("next.success", "next.done"):
        found[flag] = {"dtype": "bool", "shape": (1,), "names": None}
    for counter in ("control", "call"):
        found[counter] = {"dtype": "int64", "shape": (1,), "names": None}
    return found


def episode_frames(episode: EpisodePlan,
                   layout: Layout) -> Iterator[tuple[dict[str, Any], dict[str, np.ndarray]]]:
    """Each frame as ``add_frame`` takes it, with its exact images: decoded from the
    lossless streams (the delivered ones, or every control's), each checked against its
    recorded sha256 (EvidenceError otherwise)."""
    if layout.every_control:
        wanted = {frame.control: frame for frame in episode.frames}
        observed: Iterator[tuple[int, dict[str, np.ndarray], np.ndarray | None]] = (
            read_control_frames(episode.folder))
        last, what = episode.frames[-1].control, "control"
    else:
        wanted = {frame.call: frame for frame in episode.frames}
        observed = read_observations(episode.folder)
        last, what = episode.frames[-1].call, "call"
    success = episode.record["outcome"] == "success"
    for key, images, proprio in observed:
        frame = wanted.get(key)
        if frame is None:
            continue
        done = key == last
        row: dict[str, Any] = {camera_key(c): image for c, image in images.items()}
        if proprio is not None:
            row["observation.state"] = proprio.astype(np.float32)
        row.update({"action": frame.action.astype(np.float32),
                    "next.success": np.array([done and success]), "next.done": np.array([done]),
                    "control": np.array([frame.control], dtype=np.int64),
                    "call": np.array([frame.call], dtype=np.int64), "task": frame.task})
        if not layout.every_control:
            row["actions_ran"] = np.array([frame.ran], dtype=np.int64)
        yield row, images
        if done:
            return
    raise EvidenceError(f"{episode.folder}: the observations end before {what} {last}")


def first_frame(plan: ExportPlan) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
    """The first episode's first observation, decoded: the shapes of every feature."""
    folder = plan.episodes[0].folder
    frames = read_control_frames(folder) if plan.layout.every_control else read_observations(folder)
    try:
        _, images, proprio = next(iter(frames))
    finally:
        close = getattr(frames, "close", None)
        if close is not None:
            close()  # the stream readers' ffmpeg processes end now
    return images, proprio


def write_dataset(plan: ExportPlan, out: Path, *, repo_id: str, videos: bool,
                  say: Callable[[str], None]) -> Written:
    """Write ``plan`` as a new LeRobotDataset at ``out``; nothing is left there if it fails.

    Raises MissingLerobot without lerobot, SetupError naming a case whose evidence does
    not decode to its recorded hashes."""
    dataset_class = _lerobot()
    with warnings.catch_warnings():  # lerobot's and torchvision's notes to their developers
        warnings.filterwarnings("ignore", module=r"(lerobot|torchvision)(\.|$)")
        return _write(dataset_class, plan, out, repo_id=repo_id, videos=videos, say=say)


def _write(dataset_class: Any, plan: ExportPlan, out: Path, *, repo_id: str, videos: bool,
           say: Callable[[str], None]) -> Written:
    try:
        shape_of = first_frame(plan)
    except EvidenceError as exc:
        raise SetupError(f"case {plan.episodes[0].case}: {exc}; {COPY_CASE}") from None
    dataset = dataset_class.create(repo_id, fps=plan.layout.fps,
                                   features=features(shape_of, videos, plan.layout),
                                   root=out, robot_type="panda", use_videos=videos)
    try:
        for index, episode in enumerate(plan.episodes):
            _add_episode(dataset, episode, plan.layout)
            say(f"episode {index}: {episode.case}, {len(episode.frames)} frames "
                f"({episode.record['outcome']})")
        dataset.finalize()
        written = Written(out, repo_id, len(plan.episodes), plan.frames)
        if videos:
            written.psnr_db = measure_psnr(dataset_class(repo_id, root=out, video_backend="pyav"), plan)
        write_json_atomic(out / METADATA_PATH, metadata(plan, written, videos))
    except BaseException:
        shutil.rmtree(out, ignore_errors=True)  # made by this export: it did not exist
        raise
    return written


def _add_episode(dataset: Any, episode: EpisodePlan, layout: Layout) -> None:
    try:
        for index, (row, _) in enumerate(episode_frames(episode, layout)):
            # lerobot stamps frame n at n / fps: the simulated time of its control, exactly.
            if int(row["control"][0]) * layout.fps != index * CONTROL_FREQ_HZ:
                raise RuntimeError(f"case {episode.case}: frame {index} is control "
                                   f"{int(row['control'][0])}, not at {index} / {layout.fps} s")
            dataset.add_frame(row)
    except EvidenceError as exc:
        raise SetupError(f"case {episode.case}: {exc}; {COPY_CASE}") from None
    except ValueError as exc:  # lerobot's validate_frame: not the first case's features
        raise SetupError(f"case {episode.case}: its frames do not have the features of the "
                         f"first case's ({' '.join(str(exc).split())}); export a run whose "
                         "cases share cameras, image sizes and track") from None
    dataset.save_episode()


def measure_psnr(dataset: Any, plan: ExportPlan) -> dict[str, dict[str, float | None]]:
    """Each camera's PSNR of the dataset's decoded video against the delivered images."""
    squared: dict[str, list[float]] = {}
    index = 0
    for number, episode in enumerate(plan.episodes):
        for row, images in episode_frames(episode, plan.layout):
            item = dataset[index]
            if (int(item["episode_index"]), int(item["call"])) != (number, int(row["call"][0])):
                raise RuntimeError(f"frame {index} of the dataset is not episode {number}'s "
                                   f"call {int(row['call'][0])}")
            for camera, image in images.items():
                decoded = (item[camera_key(camera)].numpy() * 255.0).round().clip(0, 255)
                error = decoded.transpose(1, 2, 0) - image.astype(np.float64)
                squared.setdefault(camera, []).append(float(np.mean(error ** 2)))
            index += 1
    return {camera: {"overall": _psnr(float(np.mean(errors))), "lowest": _psnr(max(errors))}
            for camera, errors in squared.items()}


def _psnr(mse: float) -> float | None:
    """Peak signal-to-noise ratio of 8-bit images, in dB; None for identical ones."""
    return None if mse == 0 else round(10 * math.log10(255.0 ** 2 / mse), 2)


def metadata(plan: ExportPlan, written: Written, videos: bool) -> dict[str, Any]:
    """meta/pytest_libero.json: where the dataset came from, and each episode's case."""
    run = plan.read.run
    return {
        "format": FORMAT,
        "run": {"run_dir": str(plan.read.path.resolve()), "run_id": plan.run_id,
                "profile": run["plan"]["profile"].get("name"),
                "protocol_identity": run["protocol_identity"],
                "renderer": run.get("renderer"),
                "evidence": run["plan"].get("evidence", "full")},
        "fps": plan.layout.fps,
        "layout": {"name": plan.layout.name, "actions_per_frame": plan.layout.interval,
                   "why": plan.layout.why,
                   "timestamps": "each frame's timestamp is its control / 20 s: simulated time"},
        "cameras": {camera_key(c): c for c in CAMERA_KEYS},
        "videos": videos,
        **({"psnr_db": written.psnr_db} if videos else {}),
        "episodes": [episode_metadata(plan, n, e) for n, e in enumerate(plan.episodes)],
        "skipped": [{"case": s.case, "why": s.why} for s in plan.skipped],
    }
