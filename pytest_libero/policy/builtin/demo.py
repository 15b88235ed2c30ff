"""The demo policy: recorded demonstrations, replayed open loop, one per task.

Infrastructure evidence (P11), never a model. Each shipped demonstration
(``pytest_libero/data/demos/<case id>.npy``) was recorded by a scripted controller that
read privileged simulator state (``tests/tools/make_demos.py``); its provenance sits
beside it (``<case id>.json``). The policy picks a demonstration by the instruction it
is sent, the only task identity the protocol lets a policy see (P5), and plays it as
the replay policy plays its file.
"""

from __future__ import annotations

import io
import json
from collections.abc import Mapping
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from typing import Any

import numpy as np

from pytest_libero.data import DEMOS_FOLDER, data_path
from pytest_libero.policy.builtin.policies import BuiltinPolicy
from pytest_libero.policy.contract import Observation, validate_chunk
from pytest_libero.protocol.errors import InvalidAction
from pytest_libero.protocol.hashing import sha256_bytes

KIND = "recorded demonstration (infrastructure evidence, not a model)"


@dataclass(frozen=True)
class Demo:
    """One shipped demonstration and what its provenance says of it."""

    case: str
    instruction: str
    actions: np.ndarray
    sha256: str


def shipped_demos(folder: Traversable | None = None) -> dict[str, Demo]:
    """Every demonstration in ``folder`` (the shipped ones by default) by instruction,
    each checked against its provenance."""
    folder = data_path(DEMOS_FOLDER) if folder is None else folder
    demos: dict[str, Demo] = {}
    for meta_file in sorted((p for p in folder.iterdir() if p.name.endswith(".json")),
                            key=lambda p: p.name):
        meta = json.loads(meta_file.read_text())
        data = folder.joinpath(f"{meta['case']}.npy").read_bytes()
        where = f"demo {meta['case']} ({meta_file.name})"
        if sha256_bytes(data) != meta["actions_sha256"]:
            raise ValueError(f"{where}: the action file's sha256 is not the one its provenance "
                             "records; reinstall pytest-libero, or re-record it with "
                             "tests/tools/make_demos.py")
        try:
            actions = validate_chunk(np.load(io.BytesIO(data), allow_pickle=False))
        except (ValueError, InvalidAction) as exc:
            raise ValueError(f"{where}: not a valid action file: {exc}") from None
        if meta["instruction"] in demos:
            raise ValueError(f"{where}: instruction {meta['instruction']!r} is already "
                             f"demo {demos[meta['instruction']].case}'s; one demo per instruction")
        demos[meta["instruction"]] = Demo(meta["case"], meta["instruction"], actions,
                                          meta["actions_sha256"])
    return demos


class DemoPolicy(BuiltinPolicy):
    """Plays the shipped demonstration of the instruction it is sent, then stops."""

    name = "demo"

    def __init__(self, chunk: int = 5) -> None:
        super().__init__(chunk)
        self.demos = shipped_demos()
        self.metadata = {**self.metadata, "kind": KIND,
                         "demos": {d.case: d.sha256 for d in self.demos.values()}}

    def infer(self, observation: Observation) -> Mapping[str, Any]:
        demo = self.demos.get(observation.language)
        if demo is None:
            raise ValueError(
                f"no recorded demonstration for the instruction {observation.language!r}; the "
                f"demo covers {', '.join(d.case for d in self.demos.values())} (run "
                "`pytest --libero-profile=demo` without a scope option to select exactly those)"
            )
        start = observation.executed_controls
        if start >= len(demo.actions):
            return {"stop": True}
        return {"actions": demo.actions[start : start + self.chunk]}
