"""``pytest-libero export``: the frame rule against the loop's own ground truth, the plan
of a run's episodes, and every refusal, without lerobot (issue 43).

The episodes are real runs of the control loop with the real evidence writer on a fake
scene (tests/scripted_runs.py); a listener beside the writer keeps the action each
control executed, which the frames read back from the case folder must match. Writing
the dataset with lerobot itself is tests/test_lerobot_export.py's, in the lerobot venv.
"""

from __future__ import annotations

import json
import shutil
import sys
from dataclasses import replace
from pathlib import Path

import cli_runs
import numpy as np
import pytest
from cli_runs import Said
from scripted_runs import Episode, Played, make_run, play

from pytest_libero.evidence.controls import read_control_frames
from pytest_libero.evidence.layout import ACTIONS_NAME, DATASET, REPLAYABLE, stream_name
from pytest_libero.evidence.reader import read_actions, read_observation_hashes
from pytest_libero.export.dataset import INSTALL, camera_key, features
from pytest_libero.export.episodes import Layout, episode_metadata, plan_export
from pytest_libero.export.frames import DECISIONS, EVERY_CONTROL, FrameRuleError, LayoutRefused, plan_frames
from pytest_libero.protocol.errors import SetupError
from pytest_libero.results.layout import RESULTS_NAME, RUN_NAME, case_path

Frame = tuple[int, int, list[list[float]] | list[float], int]
"""(call, control, the frame's action or actions, how many of them are holds)."""


def _hold(gripper: float) -> list[float]:
    return [0.0] * 6 + [gripper]


def expected_every_control(played: Played) -> list[Frame]:
    """One frame per control that ran, from the loop's own record: the latest call sent
    by then, and the action stepped there."""
    frames = []
    for control in sorted(played.truth.ran):
        call = max(call for call, at in played.truth.observed if at <= control)
        action, held = played.truth.ran[control]
        frames.append((call, control, action.tolist(), int(held)))
    return frames


def decision_controls(played: Played) -> dict[int, int]:
    """Control -> the last call observed there, for the controls that ran."""
    chosen: dict[int, int] = {}
    for call, control in played.truth.observed:
        if control in played.truth.ran:
            chosen[control] = call
    return chosen


def expected_decisions(played: Played, interval: int) -> list[Frame]:
    """One frame per decision, with the K actions stepped from it (the hold past the end)."""
    ran = played.truth.ran
    frames = []
    for control, call in sorted(decision_controls(played).items()):
        span = [c for c in range(control, control + interval) if c in ran]
        actions = [ran[c][0].tolist() for c in span]
        actions += [_hold(actions[-1][6])] * (interval - len(span))
        frames.append((call, control, actions, sum(ran[c][1] for c in span)))
    return frames


def evenly_spaced(played: Played, interval: int) -> bool:
    return sorted(decision_controls(played)) == [n * interval for n in range(len(decision_controls(played)))]


def read_back(folder: Path, played: Played, layout: str, interval: int = 1) -> list[Frame]:
    counters = played.result.counters
    frames = plan_frames(list(read_observation_hashes(folder)), list(read_actions(folder)),
                         counters.executed_controls, counters.held_controls, layout=layout,
                         interval=interval)
    return [(f.call, f.control, f.action.tolist(), f.held) for f in frames]


SCENARIOS = {
    "every control at replan interval 1": Episode(replan=1, calls=6, horizon=3),
    "decision controls only at K=3": Episode(replan=3, calls=4, horizon=5),
    "late replies: an earlier reply's action, clipped": Episode(delay=2, calls=5, scale=1.3),
    "held frames keep the gripper as sent": Episode(replan=5, calls=6, horizon=3, delay=2, scale=2.0),
    "every action stale: holds only": Episode(calls=4, horizon=3, delay=5),
    "an ignored stop: two observations at one control": Episode(
        calls=5, horizon=3, script=(None, "stop", None, None, None)),
    "success in the middle of a chunk": Episode(replan=3, horizon=5, success_at=5),
}
UNEVEN = {"held frames keep the gripper as sent", "every action stale: holds only"}
"""The scenarios whose decisions are not K controls apart: refused for decision frames."""


@pytest.mark.parametrize("name", SCENARIOS)
def test_every_control_is_a_frame_with_the_action_it_executed(name: str, tmp_path: Path) -> None:
    played = play(tmp_path / "case", SCENARIOS[name])
    expected = expected_every_control(played)
    assert len(expected) == played.result.counters.executed_controls > 0
    assert read_back(tmp_path / "case", played, EVERY_CONTROL) == expected


@pytest.mark.parametrize("name", SCENARIOS)
def test_decision_frames_hold_the_k_actions_run_from_them_or_are_refused(name: str, tmp_path: Path) -> None:
    episode = SCENARIOS[name]
    played = play(tmp_path / "case", episode)
    assert evenly_spaced(played, episode.replan) == (name not in UNEVEN)
    if name in UNEVEN:
        with pytest.raises(LayoutRefused, match=f"not every {episode.replan} controls from 0"):
            read_back(tmp_path / "case", played, DECISIONS, episode.replan)
        return
    got = read_back(tmp_path / "case", played, DECISIONS, episode.replan)
    assert got == expected_decisions(played, episode.replan)
    assert [control for _, control, _, _ in got] == [n * episode.replan for n in range(len(got))]


def test_the_scenarios_reach_what_they_are_named_for(tmp_path: Path) -> None:
    """Holds with a gripper outside [-1, 1] (as sent, not clipped), two observations at
    one control, a chunk cut by success (padded), and decision-time frames only: else
    the rules above are untested."""
    held = play(tmp_path / "held", SCENARIOS["held frames keep the gripper as sent"])
    grippers = [a[6] for _, _, a, was_held in expected_every_control(held) if was_held]
    assert any(abs(g) > 1 for g in grippers), grippers
    twice = play(tmp_path / "twice", SCENARIOS["an ignored stop: two observations at one control"])
    controls = [control for _, control in twice.truth.observed]
    assert len(controls) > len(set(controls))
    sparse = play(tmp_path / "sparse", SCENARIOS["decision controls only at K=3"])
    assert [c for _, c, _, _ in expected_decisions(sparse, 3)] == [0, 3, 6, 9]
    cut = play(tmp_path / "cut", SCENARIOS["success in the middle of a chunk"])
    assert read_back(tmp_path / "cut", cut, DECISIONS, 3)[-1][1] == 3
    frames = plan_frames(list(read_observation_hashes(tmp_path / "cut")),
                         list(read_actions(tmp_path / "cut")), cut.result.counters.executed_controls,
                         layout=DECISIONS, interval=3)
    assert [f.ran for f in frames] == [3, 2]


def test_actions_that_cannot_be_one_episode_are_refused(tmp_path: Path) -> None:
    played = play(tmp_path / "case", Episode(calls=3))
    hashes = list(read_observation_hashes(tmp_path / "case"))
    chunks = list(read_actions(tmp_path / "case"))
    controls = played.result.counters.executed_controls
    overlapping = [chunks[0], replace(chunks[1], sent_at_control=chunks[0].sent_at_control)]
    with pytest.raises(FrameRuleError, match="another reply's action also ran at"):
        plan_frames(hashes, overlapping, controls)
    with pytest.raises(FrameRuleError, match="outside the episode's 5 controls"):
        plan_frames(hashes, chunks, 5)
    with pytest.raises(FrameRuleError, match="the record counts 2 held controls"):
        plan_frames(hashes, chunks, controls, held=2)


# -- a whole run --------------------------------------------------------------------------


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict[str, Played]]:
    return make_run(tmp_path_factory.mktemp("run"))


def test_completed_cases_become_episodes_in_selection_order_and_the_rest_are_listed(
    run: tuple[Path, dict[str, Played]], tmp_path: Path
) -> None:
    folder, played = run
    plan = plan_export(folder, tmp_path / "dataset")
    assert [e.case for e in plan.episodes] == ["libero_10-00", "libero_10-00~latency2"]
    assert [(s.case, s.why) for s in plan.skipped] == [
        ("libero_10-01", "errored (environment)"),
        ("libero_10-02", "completed without a control after an observation: no frame")]
    assert (plan.layout.name, plan.layout.interval, plan.layout.fps) == (DECISIONS, 2, 10)
    for episode in plan.episodes:
        got = [(f.call, f.control, f.action.tolist(), f.held) for f in episode.frames]
        assert got == expected_decisions(played[episode.case], 2)
    perturbed = episode_metadata(plan, 1, plan.episodes[1])
    assert {k: perturbed[k] for k in ("episode_index", "case", "run_id", "outcome", "cause",
                                      "perturbation", "variant_identity")} == {
        "episode_index": 1, "case": "libero_10-00~latency2", "run_id": folder.name,
        "outcome": "failure", "cause": "control_cap",
        "perturbation": {"kind": "latency", "level": 2, "source": "generated"},
        "variant_identity": "libero-perturb-v1:" + "1" * 32}
    native = episode_metadata(plan, 0, plan.episodes[0])
    assert (native["cause"], native["perturbation"], native["held_actions"]) == ("success", None, 0)
    assert (native["score"], native["progress"]) == (None, None)  # a record without progress
    assert (native["layout"], perturbed["held_actions"]) == (DECISIONS, 2)  # the delay's first two
    assert native["profile"]["name"] == "scripted" and native["renderer"]["sha256"] == "2" * 64
    assert not (tmp_path / "dataset").exists()


def test_a_run_that_kept_every_control_exports_every_control(tmp_path: Path) -> None:
    folder, played = make_run(tmp_path / "run", level=DATASET)
    plan = plan_export(folder, tmp_path / "dataset")
    assert (plan.layout.name, plan.layout.fps) == (EVERY_CONTROL, 20)
    assert [e.case for e in plan.episodes] == ["libero_10-00", "libero_10-00~latency2"]
    for episode in plan.episodes:
        got = [(f.call, f.control, f.action.tolist(), f.held) for f in episode.frames]
        assert got == expected_every_control(played[episode.case])
        kept = [control for control, _, _ in read_control_frames(episode.folder)]
        assert kept == list(range(len(episode.frames) + 1))


def test_decision_frames_that_are_not_k_apart_are_refused_naming_the_dataset_level(tmp_path: Path) -> None:
    folder, _ = make_run(tmp_path / "run", {"libero_10-00": Episode(horizon=1, seed=4)})  # H = 1 < K
    code, out, err = export(str(folder), "--lerobot", str(tmp_path / "dataset"))
    assert code == 2 and len(err.splitlines()) == 1, out + err
    assert err.startswith("pytest-libero export: case libero_10-00: its observations were "
                          "delivered at controls 0, 1, 2, 3, not every 2 controls from 0"), err
    assert err.rstrip().endswith("decision frames would claim times that did not happen: run it with "
                                 "--libero-evidence=dataset for one frame per control")
    assert not (tmp_path / "dataset").exists()


def test_a_replan_interval_that_does_not_divide_20_is_refused_for_decision_frames(tmp_path: Path) -> None:
    folder, _ = make_run(tmp_path / "run", {"libero_10-00": Episode()})
    run_json = json.loads((folder / RUN_NAME).read_text())
    run_json["plan"]["replan_interval"] = 3
    (folder / RUN_NAME).write_text(json.dumps(run_json))
    code, out, err = export(str(folder), "--lerobot", str(tmp_path / "dataset"))
    assert code == 2 and len(err.splitlines()) == 1, out + err
    assert "its replan interval K = 3 does not divide LeRobot's 20 controls per second" in err
    assert "--libero-evidence=dataset" in err and not (tmp_path / "dataset").exists()


def test_the_features_are_lerobot_s_libero_names_and_the_frame_s_shapes() -> None:
    images = {c: np.zeros((32, 32, 3), np.uint8) for c in ("agentview", "robot0_eye_in_hand")}
    every = Layout(EVERY_CONTROL, 1, "")
    found = features((images, np.zeros(9)), videos=False, layout=every)
    assert found["observation.images.image"]["shape"] == (32, 32, 3)
    assert found["observation.images.image2"]["dtype"] == "image"
    assert found["observation.state"]["shape"] == (9,)
    assert found["action"] == {"dtype": "float32", "shape": (7,),
                               "names": ["x", "y", "z", "roll", "pitch", "yaw", "gripper"]}
    assert {k for k, v in found.items() if v["dtype"] == "bool"} == {"next.success", "next.done"}
    assert "actions_ran" not in found
    assert "observation.state" not in features((images, None), videos=True, layout=every)
    assert features((images, None), videos=True, layout=every)[camera_key("agentview")]["dtype"] == "video"
    decisions = features((images, None), videos=False, layout=Layout(DECISIONS, 5, ""))
    assert decisions["action"] == {"dtype": "float32", "shape": (5, 7), "names": None}
    assert decisions["actions_ran"] == {"dtype": "int64", "shape": (1,), "names": None}


def export(*argv: str) -> Said:
    """``pytest-libero export ARGV`` in this process: exit code, stdout, stderr."""
    return cli_runs.in_process(["export", *argv])


def test_without_lerobot_one_line_says_how_to_install_it(
    run: tuple[Path, dict[str, Played]], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(sys.modules, "lerobot", None)  # not installed, whatever is here
    code, out, err = export(str(run[0]), "--lerobot", str(tmp_path / "dataset"))
    assert (code, out, err) == (2, "", INSTALL + "\n")
    assert INSTALL == "pytest-libero export --lerobot needs lerobot: pip install 'pytest-libero[lerobot]'"
    assert not (tmp_path / "dataset").exists()


def test_an_existing_output_folder_is_refused(run: tuple[Path, dict[str, Played]], tmp_path: Path) -> None:
    (tmp_path / "dataset").mkdir()
    code, out, err = export(str(run[0]), "--lerobot", str(tmp_path / "dataset"))
    assert code == 2 and err == (f"pytest-libero export: {tmp_path / 'dataset'} exists; lerobot "
                                 "writes a dataset into a new folder only (LeRobotDataset.create): "
                                 "name one that does not exist yet\n")
    assert list((tmp_path / "dataset").iterdir()) == []


def test_a_run_that_kept_no_streams_is_refused_naming_its_level(tmp_path: Path) -> None:
    folder, _ = make_run(tmp_path / "run", {"libero_10-00": Episode()}, level=REPLAYABLE)
    code, out, err = export(str(folder), "--lerobot", str(tmp_path / "dataset"))
    assert code == 2, out + err
    assert err.startswith(f"pytest-libero export: {folder}: its evidence level is 'replayable', ")
    assert "no observations.<camera>.mkv streams" in err and "--libero-evidence=full" in err
    assert len(err.splitlines()) == 1 and not (tmp_path / "dataset").exists()


@pytest.mark.parametrize("damage, needle", [
    ("stream", "does not have the sha256 its record holds"),
    ("gone", "is missing"),
    ("record", "episode.json is not JSON"),
])
def test_a_damaged_case_folder_is_named(
    run: tuple[Path, dict[str, Played]], tmp_path: Path, damage: str, needle: str
) -> None:
    folder = Path(shutil.copytree(run[0], tmp_path / "run"))
    case = case_path(folder, "libero_10-00~latency2")
    if damage == "stream":
        stream = case / stream_name("agentview")
        stream.write_bytes(stream.read_bytes()[:-10] + bytes(10))
    elif damage == "gone":
        (case / ACTIONS_NAME).unlink()
    else:
        (case / "episode.json").write_text("{cut")
    code, out, err = export(str(folder), "--lerobot", str(tmp_path / "dataset"))
    assert code == 2 and len(err.splitlines()) == 1, out + err
    assert err.startswith("pytest-libero export: case libero_10-00~latency2: ") and needle in err, err
    assert not (tmp_path / "dataset").exists()


@pytest.mark.parametrize("file, content, answer", [
    (RUN_NAME, None, "{folder}: not a run folder (no run.json); name the folder a run wrote, "
                     "<results>/<profile>/<run id>"),
    (RESULTS_NAME, b"{not json\n{}\n", "{folder}/results.jsonl:1: not a JSON line"),
])
def test_a_damaged_run_folder_gets_the_layout_s_one_line(
    run: tuple[Path, dict[str, Played]], tmp_path: Path, file: str, content: bytes | None,
    answer: str,
) -> None:
    folder = Path(shutil.copytree(run[0], tmp_path / "run"))
    if content is None:
        (folder / file).unlink()
    else:
        (folder / file).write_bytes(content)
    code, out, err = export(str(folder), "--lerobot", str(tmp_path / "dataset"))
    assert code == 2 and len(err.splitlines()) == 1, out + err
    assert err.startswith("pytest-libero export: " + answer.format(folder=folder)), err
    assert "Traceback" not in err and not (tmp_path / "dataset").exists()


def test_a_run_without_a_completed_frame_is_refused(tmp_path: Path) -> None:
    folder, _ = make_run(tmp_path / "run", {"libero_10-01": Episode(fail_at=2)})
    with pytest.raises(SetupError, match=r"no completed case with a frame to export; "
                                         r"libero_10-01: errored \(environment\)"):
        plan_export(folder, tmp_path / "dataset")


def test_the_sidecar_names_every_episode_s_case(run: tuple[Path, dict[str, Played]], tmp_path: Path) -> None:
    from pytest_libero.export.dataset import Written, metadata

    plan = plan_export(run[0], tmp_path / "dataset")
    written = Written(tmp_path / "dataset", "pytest-libero/x", 2, plan.frames)
    meta = json.loads(json.dumps(metadata(plan, written, videos=False)))
    assert meta["format"] == "pytest-libero-lerobot-export/2" and meta["fps"] == 10
    assert meta["layout"]["name"] == "decisions" and meta["layout"]["actions_per_frame"] == 2
    assert [e["case"] for e in meta["episodes"]] == ["libero_10-00", "libero_10-00~latency2"]
    assert [s["case"] for s in meta["skipped"]] == ["libero_10-01", "libero_10-02"]
    assert meta["cameras"] == {"observation.images.image": "agentview",
                               "observation.images.image2": "robot0_eye_in_hand"}
