"""Evidence levels (--libero-evidence): replayable keeps exactly the hashes and actions
full keeps, without the lossless observation streams; the reader says clearly what a
replayable folder cannot give back.

The unit tests drive both levels through the real episode loop with a fake
environment (and a fake adapter for the case and child-process paths); one simulator
test runs the same short real LIBERO case at both levels.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.runs import run_folder, run_records
from pytest_libero.catalog.selection import SelectionRequest
from pytest_libero.config.plan import EVIDENCE_LEVELS, RunPlan, Watchdog, make_plan
from pytest_libero.config.profiles import load_profile
from pytest_libero.episode.case import run_case_with_evidence
from pytest_libero.episode.host import run_isolated
from pytest_libero.episode.loop import run_episode
from pytest_libero.evidence.layout import (
    ACTIONS_NAME,
    INDEX_NAME,
    LEVELS,
    RECORD_NAME,
    VIDEO_NAME,
    EvidenceError,
    stream_name,
)
from pytest_libero.evidence.reader import (
    evidence_level,
    read_actions,
    read_observation_hashes,
    read_observations,
)
from pytest_libero.evidence.writer import CaseEvidence
from pytest_libero.policy.contract import Observation
from pytest_libero.protocol.budgets import StopRule, decisions_budget
from pytest_libero.protocol.hashing import array_sha256
from pytest_libero.safety.signals import SIGNALS_NAME

pytest.importorskip("imageio_ffmpeg")

CAMERAS = ("agentview", "robot0_eye_in_hand")
ADAPTER = f"{__name__}:FakeAdapter"


class FakeEpisode:
    """Random images and proprio, the same for the same seed; keeps only a counter."""

    identity: dict[str, Any] = {"fake": True}
    init_controls = 0

    def __init__(self, seed: int = 0, proprio: bool = True, size: int = 32,
                 image_dtype: type = np.uint8) -> None:
        self.rng = np.random.default_rng(seed)
        self.proprio = proprio
        self.size = size
        self.image_dtype = image_dtype

    def _image(self) -> np.ndarray:
        return self.rng.integers(0, 256, (self.size, self.size, 3)).astype(self.image_dtype)

    def observe(self, policy_calls: int, executed_controls: int) -> Observation:
        proprio = self.rng.standard_normal(9) if self.proprio else None
        images = {camera: self._image() for camera in CAMERAS}
        return Observation("stack the bowls", images, proprio, policy_calls, executed_controls)

    def frame(self) -> np.ndarray:
        return self._image().astype(np.uint8)

    def scene(self) -> tuple[dict[str, np.ndarray], np.ndarray | None]:
        """Every camera's image now, and the proprio (evidence level dataset)."""
        images = {camera: self._image().astype(np.uint8) for camera in CAMERAS}
        return images, self.rng.standard_normal(9) if self.proprio else None

    def step(self, action: np.ndarray, observe_next: bool = True) -> bool:
        return False

    def renders(self) -> dict[str, int] | None:
        return None

    def close(self) -> None:
        pass


class FakeAdapter:
    """--libero-adapter for the case paths: the same episode for every open."""

    def open(self, entry: Any, *, track: str, control_cap: int, render: str,
             video_stride: int) -> FakeEpisode:
        return FakeEpisode(proprio=track == "rgb+proprio")


class Wild:
    """Seeded random chunks reaching outside [-1, 1], so clip mode changes them."""

    metadata: Mapping[str, Any] = {}

    def __init__(self, seed: int = 3) -> None:
        self.rng = np.random.default_rng(seed)
        self.seen: list[dict[str, str]] = []

    def reset(self) -> None:
        pass

    def infer(self, observation: Observation) -> Any:
        self.seen.append({k: array_sha256(v) for k, v in observation.images.items()})
        return {"actions": self.rng.uniform(-1.5, 1.5, (4, 7))}

    def close(self) -> None:
        pass


def record_episode(folder: Path, level: str, *, out_of_bounds: str = "clip",
                   **episode: Any) -> tuple[dict[str, Any], Wild, Any]:
    policy = Wild()
    evidence = CaseEvidence(folder, level=level)
    result = run_episode(FakeEpisode(**episode), policy, decisions_budget(4, 3), StopRule(None),
                         init_controls=0, listener=evidence, out_of_bounds=out_of_bounds)
    return evidence.close(), policy, result


def index_lines(folder: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (folder / INDEX_NAME).read_text().splitlines()]


def plan_at(level: str, *, adapter: str = ADAPTER, track: str = "rgb+proprio",
            suite: str = "libero_object", calls: int = 2, interval: int = 3) -> RunPlan:
    return make_plan(load_profile("zero"), SelectionRequest("task_coverage", suite, (0,)),
                     budget_mode="decisions", max_policy_calls=calls, replan_interval=interval,
                     track=track, adapter=adapter, render="consumed", video_stride=1,
                     evidence=level)


def test_writer_levels_are_the_plans() -> None:
    assert LEVELS == EVIDENCE_LEVELS == ("full", "replayable", "dataset")
    with pytest.raises(ValueError, match="evidence level must be one of full, replayable, dataset"):
        CaseEvidence(Path("/nonexistent/never-created"), level="hashes")


def test_replayable_keeps_the_same_hashes_and_exact_actions_without_streams(tmp_path: Path) -> None:
    full, full_policy, full_result = record_episode(tmp_path / "full", "full")
    lean, lean_policy, lean_result = record_episode(tmp_path / "lean", "replayable")
    assert full_result.outcome == lean_result.outcome == "failure"
    assert full_policy.seen == lean_policy.seen  # the same episode, delivered the same

    assert full["level"] == "full" and lean["level"] == "replayable"
    assert set(full["files"]) == {INDEX_NAME, ACTIONS_NAME, VIDEO_NAME, *map(stream_name, CAMERAS)}
    assert set(lean["files"]) == {INDEX_NAME, ACTIONS_NAME, VIDEO_NAME}
    assert not list((tmp_path / "lean").glob("*.mkv"))
    assert lean["observations"]["streams"] == {} and lean["observations"]["count"] == 4
    assert lean["video"] == full["video"] and lean["actions"] == full["actions"]

    # Every hash, shape and counter agrees; only the frame numbers and proprio bytes go.
    full_lines, lean_lines = index_lines(tmp_path / "full"), index_lines(tmp_path / "lean")
    assert len(full_lines) == len(lean_lines) == 4
    for kept, lean_line, seen in zip(full_lines, lean_lines, lean_policy.seen):
        for entry in kept["images"].values():
            del entry["frame"]
        del kept["proprio"]["base64"]
        assert lean_line == kept
        assert {c: e["sha256"] for c, e in lean_line["images"].items()} == seen
    assert list(read_observation_hashes(tmp_path / "lean")) == \
        list(read_observation_hashes(tmp_path / "full"))

    # The actions file is byte for byte the same, clipped prefixes included.
    actions = (tmp_path / "lean" / ACTIONS_NAME).read_bytes()
    assert actions == (tmp_path / "full" / ACTIONS_NAME).read_bytes()
    assert full["files"][ACTIONS_NAME] == lean["files"][ACTIONS_NAME]
    chunks = list(read_actions(tmp_path / "lean"))
    assert len(chunks) == 4 and all(c.clipped is not None for c in chunks)
    for chunk in chunks:
        assert chunk.executed_actions is not None and chunk.actions is not None
        assert np.abs(chunk.executed_actions).max() <= 1.0 < np.abs(chunk.actions).max()


def test_hashes_read_back_at_both_levels_match_the_decoded_full_observations(tmp_path: Path) -> None:
    record_episode(tmp_path / "full", "full")
    record_episode(tmp_path / "lean", "replayable")
    decoded = list(read_observations(tmp_path / "full"))
    hashes = list(read_observation_hashes(tmp_path / "lean"))
    assert [h.call for h in hashes] == [call for call, _, _ in decoded] == [1, 2, 3, 4]
    for h, (_, images, proprio) in zip(hashes, decoded):
        assert h.images == {c: array_sha256(image) for c, image in images.items()}
        assert proprio is not None and h.proprio == array_sha256(proprio)
        assert h.language == "stack the bowls" and h.policy_calls == h.call - 1
    assert [h.executed_controls for h in hashes] == [0, 3, 6, 9]


def test_reading_observations_of_a_replayable_case_names_the_folder_and_level(tmp_path: Path) -> None:
    folder = tmp_path / "lean"
    record_episode(folder, "replayable")
    assert evidence_level(folder) == "replayable"
    assert evidence_level(_full_folder(tmp_path)) == "full"
    with pytest.raises(EvidenceError) as raised:
        read_observations(folder)  # at once, before any iteration
    message = str(raised.value)
    assert str(folder) in message and "'replayable'" in message
    assert "read_observation_hashes" in message and "--libero-evidence=full" in message
    assert not isinstance(raised.value, FileNotFoundError)
    assert raised.value.kind == "evidence"


def _full_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "full"
    if not folder.exists():
        record_episode(folder, "full")
    return folder


def test_level_of_a_folder_without_observations_comes_from_its_record(tmp_path: Path) -> None:
    folder = tmp_path / "case"
    summary = CaseEvidence(folder, level="replayable").close()  # nothing was observed
    assert evidence_level(folder) == "full"  # nothing says otherwise yet
    (folder / RECORD_NAME).write_text(json.dumps({"case": "x", "evidence": summary}))
    assert evidence_level(folder) == "replayable"
    with pytest.raises(EvidenceError, match="'replayable'"):
        read_observations(folder)
    (folder / RECORD_NAME).write_text(json.dumps({"case": "x", "evidence": None,
                                                  "evidence_level": "replayable"}))
    assert evidence_level(folder) == "replayable"
    assert list(read_observation_hashes(folder)) == [] and list(read_actions(folder)) == []


def test_a_folder_without_evidence_is_an_evidence_error_naming_it(tmp_path: Path) -> None:
    for reader in (read_observations, read_observation_hashes, read_actions, evidence_level):
        with pytest.raises(EvidenceError, match=re.escape(f"{tmp_path} has no")):
            result = reader(tmp_path)
            if not isinstance(result, str):
                list(result)


def test_a_damaged_replayable_line_in_a_full_index_is_named(tmp_path: Path) -> None:
    folder = _full_folder(tmp_path)
    lines = (folder / INDEX_NAME).read_text().splitlines()
    second = json.loads(lines[1])
    for entry in second["images"].values():
        del entry["frame"]
    (folder / INDEX_NAME).write_text("\n".join([lines[0], json.dumps(second), *lines[2:]]) + "\n")
    with pytest.raises(EvidenceError, match=r"'replayable'.*\(call 2\)"):
        list(read_observations(folder))


@pytest.mark.parametrize("level", LEVELS)
def test_both_levels_refuse_the_same_images(tmp_path: Path, level: str) -> None:
    """A level changes what is kept, never how an episode goes."""
    _, _, result = record_episode(tmp_path / "case", level, image_dtype=np.float32)
    assert result.outcome == "errored" and result.error is not None
    assert result.error["kind"] == "evidence"
    assert "only uint8 (H, W, 3) RGB is stored" in result.error["message"]


@pytest.mark.parametrize("level", LEVELS)
def test_case_record_and_folder_follow_the_plans_level(tmp_path: Path, level: str) -> None:
    plan = plan_at(level)
    assert plan.evidence == level and plan.as_dict()["evidence"] == level
    record = run_case_with_evidence(plan, plan.entries[0], plan.profile.build_policy(),
                                    tmp_path / "case")
    assert record["outcome"] == "failure", record["error"]
    assert record["evidence_level"] == level
    assert record["evidence"] is not None and record["evidence"]["level"] == level
    on_disk = json.loads((tmp_path / "case" / RECORD_NAME).read_text())
    assert on_disk["evidence_level"] == level
    assert evidence_level(tmp_path / "case") == level
    streams = sorted(p.name for p in (tmp_path / "case").glob("observations.*.mkv"))
    assert streams == (sorted(map(stream_name, CAMERAS)) if level != "replayable" else [])
    controls = sorted(p.name for p in (tmp_path / "case").glob("controls.*"))
    assert controls == (["controls.agentview.mkv", "controls.jsonl", "controls.robot0_eye_in_hand.mkv"]
                        if level == "dataset" else [])
    hashes = list(read_observation_hashes(tmp_path / "case"))
    assert len(hashes) == 2 and all(h.proprio is not None for h in hashes)


def test_the_child_process_writes_at_the_plans_level(tmp_path: Path) -> None:
    plan = plan_at("replayable")
    watchdog = Watchdog.for_plan(plan, build_s=60.0, step_s=60.0)
    record = run_isolated(plan, plan.entries[0], tmp_path / "case", watchdog)
    assert record["outcome"] == "failure", record["error"]
    assert record["evidence_level"] == "replayable"
    assert record["evidence"] is not None and record["evidence"]["level"] == "replayable"
    assert not list((tmp_path / "case").glob("*.mkv"))
    assert evidence_level(tmp_path / "case") == "replayable"


def test_default_levels_follow_the_mode() -> None:
    profile = load_profile("zero")
    fast = make_plan(profile, SelectionRequest("task_coverage", "libero_object", (0,)),
                     adapter=ADAPTER, render="consumed", video_stride=1)
    assert fast.evidence == "full"
    assert replace(fast, evidence="replayable").as_dict()["evidence"] == "replayable"


@pytest.mark.simulator
def test_real_libero_case_hashes_agree_between_levels(tmp_path: Path) -> None:
    """The same short real case (zero policy, 2 decisions of K=3, rgb+proprio) at both
    levels: identical observation hashes and actions; replayable has no streams."""
    folders = {}
    for level in LEVELS:
        plan = plan_at(level, adapter="libero")
        policy = plan.profile.build_policy()
        try:
            record = run_case_with_evidence(plan, plan.entries[0], policy, tmp_path / level)
        finally:
            policy.close()
        assert record["outcome"] == "failure", record["error"]
        assert record["counters"]["executed_controls"] == 6
        assert record["evidence_level"] == level
        folders[level] = tmp_path / level

    full = list(read_observation_hashes(folders["full"]))
    lean = list(read_observation_hashes(folders["replayable"]))
    assert len(full) == 2 and full == lean
    assert all(set(h.images) == set(CAMERAS) and h.proprio is not None for h in lean)
    # The full folder's frames decode to those very hashes.
    for h, (_, images, proprio) in zip(lean, read_observations(folders["full"])):
        assert {c: array_sha256(image) for c, image in images.items()} == h.images
        assert proprio is not None and array_sha256(proprio) == h.proprio
    assert (folders["full"] / ACTIONS_NAME).read_bytes() == \
        (folders["replayable"] / ACTIONS_NAME).read_bytes()
    assert not list(folders["replayable"].glob("*.mkv"))
    assert len(list(folders["full"].glob("*.mkv"))) == 2
    with pytest.raises(EvidenceError, match="'replayable'"):
        read_observations(folders["replayable"])


@pytest.mark.simulator
def test_plugin_run_at_replayable_keeps_hashes_actions_and_video(pytester: pytest.Pytester) -> None:
    """--libero-evidence=replayable end to end: option, plan, case child, run folder."""
    result = pytester.runpytest(
        "--libero-profile=zero", "--libero-scope=task_coverage", "--libero-suite=libero_object",
        "--libero-task-ids=0", "--libero-budget-mode=decisions", "--libero-max-policy-calls=2",
        "--libero-replan-interval=3", "--libero-evidence=replayable",
    )
    result.assert_outcomes(failed=1)  # the zero policy never succeeds
    run = run_folder(pytester.path / "libero-results", "zero")
    assert json.loads((run / "run.json").read_text())["plan"]["evidence"] == "replayable"
    [record] = run_records(run)
    assert record["outcome"] == "failure" and record["evidence_level"] == "replayable"
    case = run / "cases" / "libero_object-00"
    assert sorted(p.name for p in case.iterdir() if p.suffix != ".log") == sorted([
        ACTIONS_NAME, RECORD_NAME, VIDEO_NAME, INDEX_NAME, SIGNALS_NAME])
    hashes = list(read_observation_hashes(case))
    assert [h.call for h in hashes] == [1, 2] and all(set(h.images) == set(CAMERAS) for h in hashes)
    assert [c.executed for c in read_actions(case)] == [3, 3]
    with pytest.raises(EvidenceError, match="'replayable'"):
        read_observations(case)
