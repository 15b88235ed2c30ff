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
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.resources.abc import Traversable
from typing import Any

import numpy as np

from pytest_libero.policy.builtin.demo_files import (
    MAX_BYTES,
    SHIPPED_SHA256,
    bounded,
    demo_bytes,
    shipped_name,
)
from pytest_libero.policy.builtin.policies import BuiltinPolicy
from pytest_libero.policy.contract import Observation, validate_chunk
from pytest_libero.protocol.errors import InvalidAction
from pytest_libero.protocol.hashing import sha256_bytes
from pytest_libero.protocol.shipped import damaged, need

KIND = "recorded demonstration (infrastructure evidence, not a model)"


@dataclass(frozen=True)
class Demo:
    """One shipped demonstration and what its provenance says of it."""

    case: str
    instruction: str
    actions: np.ndarray
    sha256: str


def shipped_demos(folder: Traversable | None = None) -> dict[str, Demo]:
    """Every demonstration by instruction, each checked against its provenance: the
    shipped ones (each file first the very one this version shipped, ``demo_files.py``;
    a damaged one is the damaged-install line), or those in ``folder`` (recordings being
    made: every ``<case>.json`` there, each read bounded; ValueError naming the file)."""
    if folder is None:
        names = sorted(name for name in SHIPPED_SHA256 if name.endswith(".json"))
        return _demos(names, demo_bytes, lambda name, why: damaged(shipped_name(name), why))
    place = folder

    def read(name: str) -> bytes:
        return bounded(place.joinpath(name), MAX_BYTES)

    names = sorted(p.name for p in folder.iterdir() if p.name.endswith(".json"))
    return _demos(names, read, lambda name, why: ValueError(f"{name}: {why}"))


def _demos(names: list[str], read: Callable[[str], bytes],
           refused: Callable[[str, str], Exception]) -> dict[str, Demo]:
    demos: dict[str, Demo] = {}
    for meta_name in names:
        try:
            meta = json.loads(read(meta_name).decode("utf-8"))
            case, instruction, recorded = (need(meta, key, str) for key in
                                           ("case", "instruction", "actions_sha256"))
        except (KeyError, TypeError, UnicodeDecodeError, json.JSONDecodeError) as exc:
            why = f"no {exc}" if isinstance(exc, KeyError) else str(exc)
            raise refused(meta_name, f"not a demo's provenance ({type(exc).__name__}: {why})") from None
        data = read(f"{case}.npy")
        where = f"demo {case} ({meta_name})"
        if sha256_bytes(data) != recorded:
            raise ValueError(f"{where}: the action file's sha256 is not the one its provenance "
                             "records; reinstall pytest-libero, or re-record it with "
                             "tests/tools/make_demos.py")
        try:
            actions = validate_chunk(np.load(io.BytesIO(data), allow_pickle=False))
        except (ValueError, InvalidAction) as exc:
            raise ValueError(f"{where}: not a valid action file: {exc}") from None
        if instruction in demos:
            raise ValueError(f"{where}: instruction {instruction!r} is already "
                             f"demo {demos[instruction].case}'s; one demo per instruction")
        demos[instruction] = Demo(case, instruction, actions, recorded)
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
