"""Built-in reference policies: zero, random and replay.

They exercise the whole evaluation path without a model. Their results are
infrastructure evidence (P11), never a capability claim; their profiles say so.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

from pytest_libero.policy.contract import Observation, validate_chunk
from pytest_libero.policy.limits import MAX_CHUNK_STEPS
from pytest_libero.protocol.errors import InvalidAction
from pytest_libero.protocol.parameters import ACTION_DIM, ACTION_HIGH, ACTION_LOW, SEED
from pytest_libero.protocol.text import echo

HOLD_OPEN = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0])
COLUMNS = ("x", "y", "z", "roll", "pitch", "yaw", "gripper")


def _whole(name: str, value: object, minimum: int, maximum: int | None = None) -> int:
    """An integer option as given, never rounded: 2.5 or "abc" is refused by name."""
    if not isinstance(value, (int, np.integer)) or isinstance(value, bool) or value < minimum:
        raise ValueError(f"{name} must be at least {minimum}, a whole number; got {echo(value)}")
    if maximum is not None and value > maximum:
        raise ValueError(f"{name} must be at most {maximum}, the most actions a reply may "
                         f"hold; got {value}")
    return int(value)


class BuiltinPolicy:
    """Shared plumbing: metadata, no-op reset and close."""

    name = "builtin"

    def __init__(self, chunk: int = 5) -> None:
        self.chunk = _whole("chunk", chunk, 1, MAX_CHUNK_STEPS)
        self.metadata: Mapping[str, Any] = {"policy": self.name, "chunk": self.chunk}

    def reset(self) -> None:
        pass

    def close(self) -> None:
        pass


class ZeroPolicy(BuiltinPolicy):
    """Holds the arm still with the gripper open."""

    name = "zero"

    def infer(self, observation: Observation) -> Mapping[str, Any]:
        return {"actions": np.tile(HOLD_OPEN, (self.chunk, 1))}


class RandomPolicy(BuiltinPolicy):
    """Uniform actions inside the normalized bounds, reproducible per episode."""

    name = "random"

    def __init__(self, chunk: int = 5, seed: int = SEED) -> None:
        super().__init__(chunk)
        self.seed = _whole("seed", seed, 0)
        self.metadata = {**self.metadata, "seed": self.seed}
        self._rng = np.random.default_rng(self.seed)

    def reset(self) -> None:
        self._rng = np.random.default_rng(self.seed)

    def infer(self, observation: Observation) -> Mapping[str, Any]:
        return {"actions": self._rng.uniform(-1.0, 1.0, size=(self.chunk, ACTION_DIM))}


class ReplayPolicy(BuiltinPolicy):
    """Plays an open-loop action file, indexed by the controls executed so far.

    Indexing by the executed-controls counter (accounting feedback the contract
    allows) keeps the replay exact whatever prefix of each chunk was executed.
    Once the file is exhausted it answers with a stop signal.
    """

    name = "replay"

    def __init__(
        self, actions: str | Path | None = None, chunk: int = 5, out_of_bounds: str = "error"
    ) -> None:
        super().__init__(chunk)
        if actions is None or not str(actions):
            raise ValueError(
                "the replay policy needs an action file: --libero-policy-option actions=PATH"
            )
        path = Path(actions).expanduser()
        if not path.is_file():
            raise FileNotFoundError(
                f"replay action file {path} {'is a folder' if path.is_dir() else 'does not exist'}"
                "; pass an (N, 7) .npy file with "
                "--libero-policy-option actions=PATH"
            )
        self.actions = load_actions(path, out_of_bounds)
        self.metadata = {**self.metadata, "actions_file": str(path), "n_actions": len(self.actions)}

    def infer(self, observation: Observation) -> Mapping[str, Any]:
        start = observation.executed_controls
        if start >= len(self.actions):
            return {"stop": True}
        return {"actions": self.actions[start : start + self.chunk]}


def load_actions(path: Path, out_of_bounds: str = "error") -> np.ndarray:
    """An action file checked as the run's out-of-bounds rule says.

    Shape, dtype and finiteness are checked under both rules; values outside [-1, 1]
    are refused under "error" (naming the first one) and left for the episode to clip
    and count under "clip", as for any policy's reply.
    """
    try:
        raw = np.load(path, allow_pickle=False)
    except (OSError, ValueError, EOFError) as exc:
        # numpy calls anything that is not .npy "pickled data"; pickles are never loaded.
        reason = ("not in .npy format, or it holds Python objects" if "pickle" in str(exc)
                  else str(exc))
        raise ValueError(f"replay action file {path} is not a readable .npy array ({reason}); "
                         "save an (N, 7) float array with numpy.save") from None
    try:
        actions = validate_chunk(raw, bounded=False, longest=None)  # an episode, not a chunk
    except InvalidAction as exc:
        raise ValueError(f"replay action file {path}: {exc}") from None
    outside = np.argwhere((actions < ACTION_LOW) | (actions > ACTION_HIGH))
    if out_of_bounds == "error" and len(outside):
        row, column = (int(i) for i in outside[0])
        raise ValueError(
            f"replay action file {path}: row {row}, column {column} ({COLUMNS[column]}) is "
            f"{actions[row, column]:.6g}, outside [{ACTION_LOW:g}, {ACTION_HIGH:g}] "
            f"({len(outside)} value(s) in all); fix the file, or pass "
            "--libero-out-of-bounds=clip to clip each executed action and count the clips"
        )
    return actions
