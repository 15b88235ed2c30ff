"""Load a LeRobot dataset the way its users do and print what it holds, as JSON.

Run with the lerobot venv's python: ``read_lerobot_dataset.py REPO_ID ROOT [--video-backend
pyav] [--delta-action 0,0.05,...]``. It loads ``LeRobotDataset(repo_id, root=ROOT)``
(offline) and prints one JSON object: the dataset's fps, features and counts, and every
frame as lerobot hands it back (images turned back into uint8 HWC and given by their
sha256, so the test can compare them with the case folders' recorded hashes without
shipping pixels). With ``--delta-action`` the dataset is loaded a second time with
``delta_timestamps={"action": [...]}`` (seconds), as a trainer drawing action chunks
does, and each frame also holds ``delta``: the actions lerobot returns at those times
and its ``action_is_pad``.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

import numpy as np  # noqa: E402
from lerobot.datasets.lerobot_dataset import LeRobotDataset  # noqa: E402


def image_bytes(value: Any) -> np.ndarray:
    """A float CHW image in [0, 1] back to the uint8 HWC bytes it was made from."""
    array = (value.numpy() * 255.0).round().clip(0, 255).astype(np.uint8)
    return np.ascontiguousarray(array.transpose(1, 2, 0))


def frame(item: dict[str, Any], image_keys: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, value in item.items():
        if key in image_keys:
            out[key] = hashlib.sha256(image_bytes(value).tobytes()).hexdigest()
        elif key == "task":
            out[key] = value
        elif value.ndim == 0:
            out[key] = value.item()
        else:
            out[key] = value.tolist()
    return out


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("repo_id")
    parser.add_argument("root")
    parser.add_argument("--video-backend", default=None)
    parser.add_argument("--delta-action", default=None)
    args = parser.parse_args()
    dataset = LeRobotDataset(args.repo_id, root=args.root, video_backend=args.video_backend)
    keys = list(dataset.meta.camera_keys)
    frames = [frame(dataset[i], keys) for i in range(len(dataset))]
    if args.delta_action:
        times = [float(t) for t in args.delta_action.split(",")]
        chunked = LeRobotDataset(args.repo_id, root=args.root, video_backend=args.video_backend,
                                 delta_timestamps={"action": times})
        for i, found in enumerate(frames):
            item = chunked[i]
            found["delta"] = {"action": item["action"].tolist(),
                              "action_is_pad": item["action_is_pad"].tolist()}
    print(json.dumps({
        "fps": dataset.fps,
        "codebase_version": dataset.meta.info["codebase_version"],
        "features": {k: {"dtype": v["dtype"], "shape": list(v["shape"])}
                     for k, v in dataset.features.items()},
        "episodes": dataset.num_episodes,
        "frames": frames,
    }))


if __name__ == "__main__":
    main()
