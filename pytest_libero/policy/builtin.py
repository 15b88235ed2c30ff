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
from pytest_libero.protocol.parameters import ACTION_DIM, SEED

HOLD_OPEN = np.array([0.0, 0.0, 0.0, 0.0, 0.0, 0.0, -1.0])


class _Builtin:
    """Shared plumbing: metadata, no-op reset and close."""

    name = "builtin"

    def __init__(self, chunk: int = 5) -> None:
        if chunk < 1:
            raise ValueError(f"chunk must be at least 1, got {chunk}")
        self.chunk = int(chunk)
        self.metadata: Mapping[str, Any] = {"policy": self.name, "chunk": self.chunk}

    def reset(self) -> None:
        pass

    def close(self) -> None:
        pass


class ZeroPolicy(_Builtin):
    """Holds the arm still with the gripper open."""

    name = "zero"

    def infer(self, observation: Observation) -> Mapping[str, Any]:
        return {"actions": np.tile(HOLD_OPEN, (self.chunk, 1))}


class RandomPolicy(_Builtin):
    """Uniform actions inside the normalized bounds, reproducible per episode."""

    name = "random"

    def __init__(self, chunk: int = 5, seed: int = SEED) -> None:
        super().__init__(chunk)
        self.seed = int(seed)
        self.metadata = {**self.metadata, "seed": self.seed}
        self._rng = np.random.default_rng(self.seed)

    def reset(self) -> None:
        self._rng = np.random.default_rng(self.seed)

    def infer(self, observation: Observation) -> Mapping[str, Any]:
        return {"actions": self._rng.uniform(-1.0, 1.0, size=(self.chunk, ACTION_DIM))}


class ReplayPolicy(_Builtin):
    """Plays an open-loop action file, indexed by the controls executed so far.

    Indexing by the executed-controls counter (accounting feedback the contract
    allows) keeps the replay exact whatever prefix of each chunk was executed.
    Once the file is exhausted it answers with a stop signal.
    """

    name = "replay"

    def __init__(self, actions: str | Path | None = None, chunk: int = 5) -> None:
        super().__init__(chunk)
        if actions is None:
            raise ValueError(
                "the replay policy needs an action file: --libero-policy-option actions=PATH"
            )
        path = Path(actions).expanduser()
        if not path.is_file():
            raise FileNotFoundError(
                f"replay action file {path} does not exist; pass an (N, 7) .npy file with "
                "--libero-policy-option actions=PATH"
            )
        self.actions = validate_chunk(np.load(path, allow_pickle=False))
        self.metadata = {**self.metadata, "actions_file": str(path), "n_actions": len(self.actions)}

    def infer(self, observation: Observation) -> Mapping[str, Any]:
        start = observation.executed_controls
        if start >= len(self.actions):
            return {"stop": True}
        return {"actions": self.actions[start : start + self.chunk]}
