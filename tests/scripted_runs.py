"""Run folders made without the simulator, for the export's and the trackers' tests.

Each case is a real episode of the real loop (``episode.loop.run_episode``) with the real
evidence writer (``CaseEvidence``), on a fake scene with small random images, so its
case folder is what a run writes; run.json, results.jsonl and summary.json are written
around them with the real summary (``results.summary.summarize``). A listener beside the
writer keeps the ground truth the export must find again: the action each control
executed and whether it was a hold.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from pytest_libero.episode.loop import EpisodeResult, Tee, run_episode
from pytest_libero.episode.record import RECORD_SCHEMA
from pytest_libero.evidence.layout import FULL, RECORD_NAME
from pytest_libero.evidence.renderer import REFERENCE_FRAME
from pytest_libero.evidence.writer import CaseEvidence
from pytest_libero.files import write_json_atomic
from pytest_libero.policy.contract import Observation, Reply
from pytest_libero.protocol.budgets import StopRule, decisions_budget
from pytest_libero.protocol.clock import ChunkTiming
from pytest_libero.results.layout import RESULTS_NAME, RUN_NAME, SUMMARY_NAME, case_path
from pytest_libero.results.summary import summarize

CAMERAS = ("agentview", "robot0_eye_in_hand")
INSTRUCTION = "put the soup in the basket"
PROTOCOL = "libero-protocol-v1:" + "0" * 32
PERTURBED = "libero-perturb-v1:" + "1" * 32


class Scene:
    """Small random images that change every control; success at ``success_at``."""

    def __init__(self, seed: int = 0, success_at: int | None = None, fail_at: int | None = None,
                 size: int = 32) -> None:
        self.rng = np.random.default_rng(seed)
        self.success_at, self.fail_at, self.size = success_at, fail_at, size
        self.controls = 0

    def _image(self) -> np.ndarray:
        return self.rng.integers(0, 256, (self.size, self.size, 3), dtype=np.uint8)

    def observe(self, policy_calls: int, executed_controls: int) -> Observation:
        images = {camera: self._image() for camera in CAMERAS}
        return Observation(INSTRUCTION, images, self.rng.standard_normal(9), policy_calls,
                           executed_controls)

    def frame(self) -> np.ndarray:
        return self._image()

    def scene(self) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
        """Every camera's image now (evidence level dataset), and a proprio vector."""
        return {camera: self._image() for camera in CAMERAS}, self.rng.standard_normal(9)

    def step(self, action: np.ndarray, observe_next: bool = True) -> bool:
        self.controls += 1
        if self.controls == self.fail_at:
            raise RuntimeError("mujoco exploded")
        return self.controls == self.success_at


class Chunks:
    """Random chunks of ``horizon`` actions in [-scale, scale]; ``script`` says "stop"
    for a stop-only reply at that call."""

    metadata: Mapping[str, Any] = {}

    def __init__(self, horizon: int = 4, seed: int = 1, scale: float = 1.0,
                 script: tuple[str | None, ...] = ()) -> None:
        self.rng = np.random.default_rng(seed)
        self.horizon, self.scale, self.script = horizon, scale, list(script)

    def reset(self) -> None:
        pass

    def infer(self, observation: Observation) -> Any:
        if self.script and self.script.pop(0) == "stop":
            return {"stop": True}
        return {"actions": self.rng.uniform(-self.scale, self.scale, (self.horizon, 7))}

    def close(self) -> None:
        pass


class Truth:
    """What the loop did: each observation's call and control, each control's action."""

    def __init__(self) -> None:
        self.observed: list[tuple[int, int]] = []
        self.ran: dict[int, tuple[np.ndarray, bool]] = {}
        """Control (0-based) -> (the action stepped, whether it was a hold)."""

    def on_observation(self, call: int, observation: Observation) -> None:
        self.observed.append((call, observation.executed_controls))

    def on_decision(self, call: int, reply: Reply) -> None:
        pass

    def on_reply(self, call: int, reply: Reply, timing: ChunkTiming) -> None:
        pass

    def on_control(self, control: int, action: np.ndarray, frame: Callable[[], np.ndarray],
                   call: int | None = None) -> None:
        self.ran[control - 1] = (np.array(action, dtype=np.float64), call is None)


@dataclass(frozen=True)
class Episode:
    """How one scripted case runs."""

    replan: int = 2
    calls: int = 4
    horizon: int = 4
    delay: int = 0
    success_at: int | None = None
    fail_at: int | None = None
    scale: float = 1.0
    script: tuple[str | None, ...] = ()
    stop_after: int | None = None
    seed: int = 0


@dataclass
class Played:
    result: EpisodeResult
    evidence: dict[str, Any]
    truth: Truth = field(default_factory=Truth)


def play(folder: Path, episode: Episode, level: str = FULL) -> Played:
    """Run ``episode`` through the real loop into a case folder, writing its evidence."""
    truth = Truth()
    evidence = CaseEvidence(folder, level=level)
    scene = Scene(episode.seed, episode.success_at, episode.fail_at)
    evidence.follow(scene.scene)  # level dataset: every control's images (else nothing)
    result = run_episode(
        scene,
        Chunks(episode.horizon, episode.seed + 1, episode.scale, episode.script),
        decisions_budget(episode.calls, episode.replan), StopRule(episode.stop_after),
        init_controls=10, listener=Tee(evidence, truth),
        out_of_bounds="clip" if episode.scale > 1 else "error",
        delays=lambda call, latency: episode.delay)
    return Played(result, evidence.close(), truth)


def record(case: str, played: Played, folder: Path, episode: Episode, level: str) -> dict[str, Any]:
    """The case record a run would write for this episode."""
    result = played.result
    suite, _, rest = case.partition("-")
    index = int(rest[:2])
    entry: dict[str, Any] = {"suite": suite, "index": index, "name": f"TASK_{index}",
                             "language": INSTRUCTION, "bddl_file": "x.bddl",
                             "init_states_file": "x.pruned_init", "family": "libero"}
    applied: dict[str, Any] = {}
    if "~" in case:
        kind, level_ = "latency", int(case[-1])
        entry.update(perturbation={"kind": kind, "level": level_}, twin=case.split("~")[0],
                     identity=PERTURBED)
        applied["perturbation"] = {"kind": kind, "level": level_, "seed": 1, "redraws": 0,
                                   "generator": "pytest-libero-perturb/1",
                                   "parameters": {"delay_controls": episode.delay}}
    return {**applied, "case": case, "entry": entry, "profile": "scripted", "outcome": result.outcome,
            "evidence_class": "infrastructure", "evidence_level": level, "track": "rgb+proprio",
            "termination": result.termination, "truncation": result.truncation,
            "counters": dict(result.counters.as_record()), "chunks": list(result.chunks),
            "error": result.error, "evidence": played.evidence, "evidence_dir": str(folder),
            "identity": {"renderer": RENDERER},
            "budget": {"mode": "decisions", "control_cap": episode.calls * episode.replan,
                       "replan_interval": episode.replan, "max_policy_calls": episode.calls}}


RENDERER = {"frame": REFERENCE_FRAME, "sha256": "2" * 64, "backend": "egl", "vendor": "Mesa",
            "renderer": "llvmpipe (LLVM 15.0.6, 256 bits)", "version": "4.5 Mesa 22.3.6"}
"""A whole renderer fingerprint, as run.json and each record carry it."""


RUN = {
    "libero_10-00": Episode(success_at=7, seed=3),
    "libero_10-00~latency2": Episode(delay=2, scale=1.3, seed=4),
    "libero_10-01": Episode(fail_at=3, seed=5),
    "libero_10-02": Episode(script=("stop",), stop_after=1, seed=6),
}
"""A success, a failure under a delay with clipping, an errored case, and a case that
stopped before its first control (no frame)."""


def make_run(root: Path, cases: Mapping[str, Episode] = RUN, *, level: str = FULL,
             unattempted: tuple[str, ...] = ()) -> tuple[Path, dict[str, Played]]:
    """A whole run folder of scripted cases; the episodes' ground truth by case."""
    folder = root / "scripted" / "20260101T000000Z-abcdef"
    selection = [*cases, *unattempted]
    played, records = {}, {}
    for case, episode in cases.items():
        played[case] = play(case_path(folder, case), episode, level)
        records[case] = record(case, played[case], case_path(folder, case), episode, level)
        write_json_atomic(case_path(folder, case) / RECORD_NAME, records[case])
    plan = {"profile": {"name": "scripted", "sha256": "3" * 64, "source": "test"},
            "selection": {"scope": "task_coverage", "suite": "libero_10", "task_ids": [0, 1, 2],
                          "mode": "fast"},
            "selection_cases": selection, "cases": selection, "shard": None,
            "budget_mode": "decisions", "max_policy_calls": 4, "replan_interval": 2,
            "track": "rgb+proprio", "evidence_class": "infrastructure", "evidence": level,
            "mode": "fast"}
    write_json_atomic(folder / RUN_NAME, {
        "run_id": folder.name, "protocol_identity": PROTOCOL, "perturb_identity": PERTURBED,
        "record_schema": RECORD_SCHEMA, "plan": plan, "installed": {"pytest-libero": "0.1.0"},
        "renderer": RENDERER})
    (folder / RESULTS_NAME).write_text("".join(json.dumps(r, sort_keys=True, default=str) + "\n"
                                               for r in records.values()))
    summary = summarize(selection, records, run_id=folder.name, profile="scripted",  # type: ignore[arg-type]
                        evidence_class="infrastructure", protocol_identity=PROTOCOL)
    write_json_atomic(folder / SUMMARY_NAME, summary)
    return folder, played
