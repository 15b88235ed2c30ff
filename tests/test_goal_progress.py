"""Each goal predicate's course in real LIBERO episodes (issue 52).

Success stays exactly LIBERO's: at every control of a demo replay that succeeds, of a
policy that stands still and of a perturbed case, "every goal predicate held after this
control" (asked of LIBERO's own ``_eval_predicate``) is what LIBERO's ``step`` says. Asking
changes nothing: the same episode with and without the probe has bit-identical physics at
every control. Through the plugin the record keeps the course and the score, verify
re-executes it, and a forged course or score is caught.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_runs import own_process
from test_verify import rewrite_line

from harness.runs import run_pytest
from pytest_libero.catalog.entries import Entry, load_catalog
from pytest_libero.policy.builtin.demo import shipped_demos

pytestmark = pytest.mark.simulator

STILL = np.array([0, 0, 0, 0, 0, 0, -1], dtype=np.float64)


def demo_actions(case: str) -> np.ndarray:
    [demo] = [d for d in shipped_demos().values() if d.case == case]
    return demo.actions


def libero_10_00() -> Entry:
    return load_catalog().suite_entries("libero_10")[0]


def drive(entry: Entry, actions: np.ndarray, *, probe: bool = True) -> tuple[list[bool], Any]:
    """LIBERO's success after each control, and the episode (its probe's history kept)."""
    from pytest_libero.adapters.libero import LiberoEpisode

    episode = LiberoEpisode(entry, track="rgb", control_cap=len(actions), render="consumed",
                            video_stride=len(actions) + 1)
    if not probe:
        episode.goals = None
    said = []
    for action in actions:
        said.append(episode.step(np.asarray(action, dtype=np.float64), observe_next=False))
        if said[-1]:
            break
    return said, episode


@pytest.mark.parametrize("name", ["demo-success", "standing-still", "perturbed-position"])
def test_all_predicates_held_is_libero_s_own_success_at_every_control(name: str) -> None:
    entry = libero_10_00()
    actions = demo_actions("libero_10-00")
    if name == "standing-still":
        actions = np.tile(STILL, (40, 1))
    elif name == "perturbed-position":
        entry = entry.perturbed("position", 1)
    said, episode = drive(entry, actions)
    try:
        history = episode.goals.history
        assert len(history) == len(said) > 0
        assert [all(held) for held in history] == said
        record = episode.goal_progress()
    finally:
        episode.close()
    assert record["predicates"] == ["(In alphabet_soup_1 basket_1_contain_region)",
                                    "(In tomato_sauce_1 basket_1_contain_region)"]
    assert record["controls"] == len(said) and record["held_at_end"] == list(history[-1])
    assert record["most_held"] == max(sum(held) for held in history)
    for index, first in enumerate(record["first_held"]):
        held_at = [c for c, held in enumerate(history, start=1) if held[index]]
        assert first == (held_at[0] if held_at else None)
    if name == "demo-success":
        assert said[-1] and len(said) == 180 and record["first_held"] == [86, 180]
    if name == "standing-still":
        assert not any(said) and record["most_held"] == 0


def test_asking_the_predicates_changes_no_physics() -> None:
    """Cameras render only for the last control's image (the one compared): the states
    compared at every control are physics, which no render reads or writes."""
    actions = demo_actions("libero_10-00")[:30]
    states = []
    for probe in (True, False):
        from pytest_libero.adapters.libero import LiberoEpisode

        episode = LiberoEpisode(libero_10_00(), track="rgb", control_cap=30,
                                video_stride=len(actions) + 1)
        if not probe:
            episode.goals = None
        try:
            seen = []
            for control, action in enumerate(actions, start=1):
                episode.step(np.asarray(action, dtype=np.float64),
                             observe_next=control == len(actions))
                seen.append(episode.env.sim.get_state().flatten().tobytes())
            image = episode.observe(1, 30).images["agentview"].tobytes()
        finally:
            episode.close()
        states.append((seen, image))
    assert states[0][1].strip(b"\0"), "the compared image is a real render, not a blank"
    assert states[0] == states[1]


@pytest.fixture(scope="module")
def demo_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("progress")
    # One video frame a decision, not a control: nothing here reads the video, and each
    # frame is a camera image (~110 ms here), 180 of them at the default stride.
    run_pytest(["-q", "--libero-profile=demo", "--libero-scope=task_coverage",
                "--libero-suite=libero_10", "--libero-task-ids=0", "--libero-run-id=demo",
                "--libero-video-stride=5"], root, timeout=900)
    return root / "libero-results" / "demo" / "demo"


@pytest.fixture(scope="module")
def short_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Ten controls of the zero policy: a record whose course verify re-executes in seconds
    (the demo's 180 controls take it a minute or more), for what any record shows."""
    root = tmp_path_factory.mktemp("short")
    run_pytest(["-q", "--libero-profile=zero", "--libero-scope=task_coverage", "--libero-suite=libero_10",
                "--libero-task-ids=0", "--libero-budget-mode=decisions", "--libero-max-policy-calls=2",
                "--libero-replan-interval=5", "--libero-run-id=short"], root, timeout=900)
    return root / "libero-results" / "zero" / "short"


def records_of(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]


def verify(run: Path) -> tuple[int, str]:
    code, out, err = own_process(["verify", str(run)], timeout=900)
    return code, out + err


def test_the_record_keeps_the_course_and_verify_re_executes_it(demo_run: Path) -> None:
    [record] = records_of(demo_run)
    assert record["outcome"] == "success" and record["score"] == 1.0
    assert record["progress"]["first_held"] == [86, 180] and record["progress"]["most_held"] == 2
    assert record["progress"]["held_at_start"] == [False, False]
    summary = json.loads((demo_run / "summary.json").read_text())
    assert summary["overall"]["score"]["mean"] == 1.0 and summary["overall"]["score"]["scored"] == 1
    code, said = verify(demo_run)
    assert code == 0 and "1 of 1 cases verified" in said, said
    verdict = json.loads((demo_run / "verify.json").read_text())["cases"][0]
    assert verdict["checked"]["progress_compared"] is True, verdict


def forge(run: Path, change: Any) -> None:
    """Edit the case's record in results.jsonl and its episode.json alike."""
    rewrite_line(run / "results.jsonl", 0, change)
    episode = run / "cases" / "libero_10-00" / "episode.json"
    episode.write_text(json.dumps(change(json.loads(episode.read_text())), indent=1, sort_keys=True))


@pytest.mark.parametrize(("field", "change", "said"), [
    ("first_held", lambda r: {**r, "progress": {**r["progress"], "first_held": [80, 180]}},
     "progress.first_held"),
    ("score", lambda r: {**r, "score": 0.5}, "score differs"),
])
def test_a_forged_course_or_score_is_a_mismatch(short_run: Path, tmp_path: Path, field: str,
                                                  change: Any, said: str) -> None:
    run = tmp_path / "short"
    shutil.copytree(short_run, run)
    assert records_of(run)[0]["progress"]["first_held"] != [80, 180]  # the forgery changes it
    forge(run, change)
    code, out = verify(run)
    verdict = json.loads((run / "verify.json").read_text())["cases"][0]
    assert code != 0 and verdict["status"] == "mismatch", out
    assert said in verdict["reason"], verdict


def test_a_record_from_before_progress_still_verifies_merges_and_exports(short_run: Path,
                                                                       tmp_path: Path) -> None:
    from pytest_libero import cli
    from pytest_libero.export.episodes import plan_export

    run = tmp_path / "short"
    shutil.copytree(short_run, run)
    forge(run, lambda r: {k: v for k, v in r.items() if k not in ("progress", "score")})
    code, said = verify(run)
    assert code == 0 and "1 of 1 cases verified" in said, said
    assert cli.main(["merge", str(run), "--out", str(tmp_path / "merged")]) == 0
    summary = json.loads((tmp_path / "merged" / "summary.json").read_text())
    assert summary["overall"]["rate"] == 0.0 and "score" not in summary["overall"]
    plan = plan_export(run, tmp_path / "dataset")
    assert [e.case for e in plan.episodes] == ["libero_10-00"]
