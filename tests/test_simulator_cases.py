"""Real LIBERO episodes through the plugin (pytester), checked against hand-computed values.

Every test here builds real MuJoCo environments: caps are small so the suite fits
CI on two CPU cores.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
from libero_native import native_first_observation
from recording import calls, records, write_profile

from pytest_libero.protocol.parameters import SEED, SETTLE_CONTROLS

pytestmark = pytest.mark.simulator
pytest_plugins = ["pytester"]

def test_zero_policy_smoke_over_the_default_scope(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest(
        "--libero-profile=zero", "--libero-budget-mode=decisions",
        "--libero-max-policy-calls=2", "--libero-replan-interval=2",
    )
    result.assert_outcomes(failed=2)
    result.stdout.fnmatch_lines([
        "*test_libero_task[[]libero_10-00]*",
        "*no native success: control cap reached after 4 controls, 2 policy calls, 2 decisions*",
        "*profile zero (infrastructure evidence, not a capability claim)*",
        "*2 selected, 2 completed, 0 success, 2 failure, 0 errored, 0 unattempted*",
    ])
    found = records(pytester, "zero")
    assert [r["case"] for r in found] == ["libero_10-00", "libero_10-01"]
    for record in found:
        assert record["outcome"] == "failure" and record["truncation"] == "control_cap"
        assert record["counters"]["executed_controls"] == 4
        assert record["counters"]["init_controls"] == SETTLE_CONTROLS
        assert record["evidence_class"] == "infrastructure"
        assert len(record["identity"]["bddl_sha256"]) == 64
        assert record["identity"]["seed"] == SEED


def test_decisions_budget_counters_are_exact(pytester: pytest.Pytester) -> None:
    # D=4, K=3. Call 1: chunk of 5 -> 3 executed. Call 2: stop only -> no decision.
    # Call 3: chunk of 3 -> 3. Call 4: chunk of 2 (short final chunk) -> 2. Then D is spent.
    script = json.dumps({"1": 5, "2": "stop", "3": 3, "4": 2}).replace('"', '\\"')
    profile = write_profile(pytester, options=f', script = "{script}"')
    result = pytester.runpytest(
        f"--libero-profile={profile}", "--libero-scope=task_coverage",
        "--libero-suite=libero_object", "--libero-task-ids=0",
        "--libero-budget-mode=decisions", "--libero-max-policy-calls=4", "--libero-replan-interval=3",
    )
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*policy-call cap reached after 8 controls, 4 policy calls, 3 decisions*"])
    [record] = records(pytester, "recording")
    assert record["counters"] == {
        "policy_calls": 4, "decisions": 3, "executed_controls": 8, "init_controls": 10,
        "stop_signals": 1, "first_success_control": None, "first_success_policy_call": None,
        "held_controls": 0, "stale_actions": 0,
    }
    assert [(c["horizon"], c["executed"], c["stop"]) for c in record["chunks"]] == [
        (5, 3, False), (0, 0, True), (3, 3, False), (2, 2, False)]
    assert record["truncation"] == "policy_call_cap" and record["termination"] is None
    assert record["budget"]["control_cap"] == 12
    assert record["budget"]["cap_source"] == "decisions: max_policy_calls 4 x replan_interval 3"
    seen = calls(pytester)
    assert [(c["policy_calls"], c["executed_controls"]) for c in seen] == [(0, 0), (1, 3), (2, 3), (3, 6)]
    assert seen[0]["language"] == "pick up the alphabet soup and place it in the basket"


def test_proprio_track_delivers_nine_encoders_and_nothing_private(pytester: pytest.Pytester) -> None:
    dump = pytester.path / "first_obs.npz"
    profile = write_profile(pytester, track="rgb+proprio", options=f', dump = "{dump}"')
    result = pytester.runpytest(
        f"--libero-profile={profile}", "--libero-scope=task_coverage",
        "--libero-suite=libero_object", "--libero-task-ids=0",
        "--libero-budget-mode=decisions", "--libero-max-policy-calls=1", "--libero-replan-interval=1",
    )
    result.assert_outcomes(failed=1)
    [first] = calls(pytester)
    # The observation type itself is the whitelist: nothing else can reach a policy.
    assert first["fields"] == ["executed_controls", "images", "language", "policy_calls", "proprio"]
    assert first["images"] == {
        "agentview": [[256, 256, 3], "uint8", True],
        "robot0_eye_in_hand": [[256, 256, 3], "uint8", True],
    }
    assert len(first["proprio"]) == 9
    [record] = records(pytester, "recording")
    assert record["track"] == "rgb+proprio"
    # The safety monitor ran on this episode, and none of its signals reached the policy:
    # the request carried only the whitelisted fields above.
    assert record["safety"]["verdict"] == "vacuous" and "engagement" in record

    # Independent check of P4/P5 against a LIBERO env driven by hand (privileged).
    native = native_first_observation("libero_object", 0)
    delivered = np.load(dump)
    assert np.array_equal(delivered["agentview"], native["agentview_image"][::-1, ::-1])
    assert np.array_equal(delivered["robot0_eye_in_hand"], native["robot0_eye_in_hand_image"][::-1, ::-1])
    expected = np.concatenate([native["robot0_joint_pos"], native["robot0_gripper_qpos"]])
    assert np.array_equal(delivered["proprio"], expected)
    private = [native[k] for k in ("robot0_eef_pos", "robot0_eef_quat", "alphabet_soup_1_pos")]
    for value in private:  # no private vector hides inside what was delivered
        assert not any(np.allclose(value, delivered["proprio"][i : i + len(value)])
                       for i in range(10 - len(value)))


def test_invalid_action_errors_one_case_and_the_run_goes_on(pytester: pytest.Pytester) -> None:
    script = json.dumps({"1": "nan-if-soup"}).replace('"', '\\"')
    profile = write_profile(pytester, options=f', script = "{script}"')
    result = pytester.runpytest(
        f"--libero-profile={profile}", "--libero-budget-mode=decisions",
        "--libero-max-policy-calls=1", "--libero-replan-interval=1",
    )
    result.assert_outcomes(errors=1, failed=1)
    result.stdout.fnmatch_lines([
        "*ERROR at setup of test_libero_task[[]libero_10-00]*",
        "*errored (invalid_action): 'actions' holds a non-finite value nan*",
        "*2 selected, 1 completed, 0 success, 1 failure, 1 errored, 0 unattempted*",
    ])
    first, second = records(pytester, "recording")
    assert first["outcome"] == "errored" and first["error"]["kind"] == "invalid_action"
    assert first["counters"]["policy_calls"] == 1 and first["counters"]["executed_controls"] == 0
    assert second["outcome"] == "failure" and second["counters"]["executed_controls"] == 1


def test_replayed_actions_succeed_natively(pytester: pytest.Pytester) -> None:
    data = Path(__file__).parent / "data"
    meta = json.loads((data / "replay_libero_object_00.json").read_text())
    assert meta["first_success_control"] == 71
    result = pytester.runpytest(
        "--libero-profile=replay", f"--libero-policy-option=actions={data / 'replay_libero_object_00.npy'}",
        "--libero-scope=task_coverage", "--libero-suite=libero_object", "--libero-task-ids=0",
        "--libero-video-stride=5",  # a video frame a decision: nothing here reads the video
    )
    result.assert_outcomes(passed=1)
    [record] = records(pytester, "replay")
    assert record["outcome"] == "success" and record["termination"] == "success"
    assert record["truncation"] is None
    # Horizon mode, K=5: calls 1-14 run controls 1-70; call 15 gets the file's last action,
    # control 71, and LIBERO's check fires on it.
    assert record["budget"]["control_cap"] == 280 and record["budget"]["mode"] == "horizon"
    counters = record["counters"]
    assert counters["first_success_control"] == 71
    assert counters["first_success_policy_call"] == 15
    assert (counters["executed_controls"], counters["policy_calls"], counters["decisions"]) == (71, 15, 15)
    last = {k: v for k, v in record["chunks"][-1].items() if k != "latency_s"}  # measured
    assert last == {"call": 15, "horizon": 1, "executed": 1, "stop": False, "sent_at_control": 70,
                    "usable_at_control": 70, "delay_controls": 0, "first_executed_index": 0}
    assert record["evidence_class"] == "infrastructure"
