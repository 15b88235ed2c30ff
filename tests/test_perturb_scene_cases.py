"""The position and environment kinds on the real simulator: one scene (libero_10-03,
the black bowl and the cabinet) at each position level, then one small run whose cases
verify re-executes, catching an edited parameter; a position case with nothing to move
is skipped at collection."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness.runs import records_by_case, run_pytest
from pytest_libero.catalog.entries import load_catalog
from pytest_libero.catalog.inventory import installed_files, load_states
from pytest_libero.perturb.kinds.environment import room_table
from pytest_libero.perturb.levels import LEVELS, table

pytestmark = pytest.mark.simulator

CASE = "libero_10-03"
TINY = ["--libero-profile=zero", "--libero-budget-mode=decisions", "--libero-max-policy-calls=1",
        "--libero-replan-interval=1", "--libero-track=rgb+proprio"]
PERTURB = "position:2,environment:3"
TOLERANCE_M = 0.01
"""How far an object may slide while settling beyond its drawn offset."""


def set_up_again(episode: Any, state: np.ndarray, level: int) -> None:
    """Set the open episode's scene up anew under the position kind at ``level``."""
    from pytest_libero.perturb.registry import kind

    applied = kind("position").on(episode, level)
    episode._perturbation = applied
    applied.set_up(state)
    episode.identity["perturbation"] = applied.record


def test_position_levels_on_one_scene() -> None:
    """Each level's objects end within its offset, touching only what touched before,
    at rest, the goal not met; the draw and its application repeat byte for byte."""
    from pytest_libero.adapters.libero import LiberoEpisode
    from pytest_libero.perturb.contacts import forbidden_contacts, touching
    from pytest_libero.perturb.kinds.position import PositionApplied
    from pytest_libero.perturb.registry import kind

    [entry] = [e for e in load_catalog().entries if e.case_id == CASE]
    _, states = installed_files(entry.bddl_file, entry.init_states_file)
    state = np.ascontiguousarray(load_states(states)[0], dtype=np.float64)
    episode = LiberoEpisode(entry.perturbed("position", 1), track="rgb", control_cap=1,
                            monitor_safety=False)
    try:
        env = episode._env
        records, settled = {}, {}
        for level in LEVELS:
            if level > 1:
                set_up_again(episode, state, level)
            record = episode.identity["perturbation"]
            records[level] = record
            settled[level] = env.sim.get_state().flatten().tobytes()
            assert record["kept"] == {"white_cabinet_1": "a fixture"}
            offset = table()["position"][level]["offset_m"]
            for name, moved in record["displacement"].items():
                assert abs(moved["horizontal_m"] - offset) <= TOLERANCE_M, (level, name, moved)
            assert not env.check_success()
            probe = PositionApplied(kind("position"), level, episode)
            probe.reference()
            probe.allowed = set()
            beyond = forbidden_contacts(probe.joints, touching(env.sim, probe.owner), set())
            assert beyond == {}, (level, beyond)
            assert record.get("robot_contacts_at_first_observation", []) == []
        assert len({json.dumps(r["intended_offset_m"]) for r in records.values()}) == len(LEVELS)
        set_up_again(episode, state, 2)
        assert episode.identity["perturbation"] == records[2]
        assert env.sim.get_state().flatten().tobytes() == settled[2]
    finally:
        episode.close()


def test_distractors_keep_clear_of_the_goals_region() -> None:
    """A goal that names a region of the table (the plate to the front of the stove): the
    region is recorded and no distractor stands in it or within the margin of it. Level 2
    finds no room: the adapter's refusal is the frozen room table's row, word for word
    (collection skips that case: tests/test_perturb_scene.py)."""
    from pytest_libero.adapters.libero import LiberoEpisode
    from pytest_libero.protocol.errors import EnvironmentFault

    [entry] = [e for e in load_catalog().entries if e.case_id == "libero_goal-05"]
    episode = LiberoEpisode(entry.perturbed("environment", 1), track="rgb", control_cap=1,
                            monitor_safety=False)
    try:
        record = episode.identity["perturbation"]
    finally:
        episode.close()
    with pytest.raises(EnvironmentFault) as refused:
        LiberoEpisode(entry.perturbed("environment", 2), track="rgb", control_cap=1,
                      monitor_safety=False)
    assert str(refused.value.__cause__) == room_table()["no_room"]["libero_goal-05~environment2"]
    assert list(record["goal_regions"]) == ["main_table_stove_front_region"]
    margin = table()["environment"][1]["margin_m"]
    assert len(record["distractors"]) == 1
    for name, placed in record["distractors"].items():
        for x0, y0, x1, y1 in record["goal_regions"].values():
            x, y = placed["settled_pos"][:2]
            outside = max(x0 - x, x - x1, y0 - y, y - y1)
            assert outside > margin, (name, placed["settled_pos"], (x0, y0, x1, y1))


@pytest.fixture(scope="module")
def scene_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, dict[str, Any]]]:
    root = tmp_path_factory.mktemp("scene")
    run_pytest(["-q", *TINY, "--libero-scope=development", "--libero-task-ids=3",
                f"--libero-perturb={PERTURB}", "--libero-run-id=scene"], root, timeout=900)
    return root, records_by_case(root / "libero-results" / "zero" / "scene")


def test_distractors_and_textures_are_placed_at_rest_and_recorded(
    scene_run: tuple[Path, dict[str, dict[str, Any]]],
) -> None:
    _, found = scene_run
    assert sorted(found) == [CASE, f"{CASE}~environment3", f"{CASE}~position2"]
    twin = found[CASE]
    for case, record in found.items():
        assert record["outcome"] == "failure", case  # ran to its cap: the goal did not hold
        if case != CASE:
            assert record["entry"]["twin"] == CASE
            assert record["entry"]["language"] == twin["entry"]["language"]
            assert record["identity"]["settled_state_sha256"] != twin["identity"]["settled_state_sha256"]
    three = found[f"{CASE}~environment3"]["perturbation"]
    assert len(three["distractors"]) == 3 == table()["environment"][3]["distractors"]
    assert {v["part"] for v in three["textures_replaced"].values()} == {"table", "floor", "wall"}
    for name, placed in three["distractors"].items():
        assert placed["settled_pos"][2] > three["table_z"] - 0.02, name  # still on the table
        assert np.hypot(*np.subtract(placed["settled_pos"][:2], placed["pos"][:2])) < 0.01, name
    assert three["robot_contacts_at_first_observation"] == []
    moved = found[f"{CASE}~position2"]["perturbation"]["displacement"]["akita_black_bowl_1"]
    assert abs(moved["horizontal_m"] - table()["position"][2]["offset_m"]) <= TOLERANCE_M


def test_verify_re_executes_scene_kinds_and_catches_an_edited_parameter(
    scene_run: tuple[Path, dict[str, dict[str, Any]]],
) -> None:
    """One re-execution each: the environment case as recorded (every byte repeats),
    the position case with its drawn direction edited in both of its accounts
    (results.jsonl and episode.json agree, so only re-execution can catch it)."""
    root, _ = scene_run
    run_dir = root / "libero-results" / "zero" / "scene"
    results = run_dir / "results.jsonl"
    lines = [json.loads(line) for line in results.read_text().splitlines()]
    for record in lines:
        if record["case"] == f"{CASE}~position2":
            record["perturbation"]["parameters"]["direction_deg"]["akita_black_bowl_1"] += 5.0
            episode = run_dir / "cases" / record["case"] / "episode.json"
            kept = json.loads(episode.read_text())
            kept["perturbation"] = record["perturbation"]
            episode.write_text(json.dumps(kept))
    results.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in lines))
    done = subprocess.run([sys.executable, "-m", "pytest_libero.cli", "verify", str(run_dir),
                           f"--case={CASE}~environment3", f"--case={CASE}~position2"],
                          capture_output=True, text=True, timeout=900)
    assert done.returncode == 1, done.stdout + done.stderr
    verdicts = {v["case"]: v for v in json.loads((run_dir / "verify.json").read_text())["cases"]}
    assert verdicts[f"{CASE}~environment3"]["status"] == "verified", verdicts
    edited = verdicts[f"{CASE}~position2"]
    assert edited["status"] == "mismatch" and edited["difference"]["field"] == "perturbation"


def test_a_position_case_with_nothing_to_move_is_skipped_at_collection(tmp_path: Path) -> None:
    """Shown as skipped with the reason, named in run.json, and not part of the selection:
    the run of the twin alone is complete (nothing unattempted), so a resume has nothing
    left to run and the gates can certify it."""
    done = run_pytest(["-q", "-rs", *TINY, "--libero-scope=task_coverage",
                       "--libero-suite=libero_goal", "--libero-run-id=skip",
                       "--libero-task-ids=0", "--libero-perturb=position:1"],
                      tmp_path, timeout=300)
    assert "libero_goal-00~position1: position cannot apply" in done.stdout, done.stdout
    assert "1 skipped" in done.stdout
    folder = tmp_path / "libero-results" / "zero" / "skip"
    plan = json.loads((folder / "run.json").read_text())["plan"]
    assert plan["selection_cases"] == ["libero_goal-00"]
    assert list(plan["not_applicable"]) == ["libero_goal-00~position1"]
    summary = json.loads((folder / "summary.json").read_text())
    assert summary["unattempted"] == [] and summary["counts"]["completed"] == 1
