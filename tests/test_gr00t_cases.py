"""Real LIBERO cases under the shipped gr00t profile, against a real ZeroMQ server.

The server (tests/gr00t_reference_server.py) is written from GR00T N1.6's documented
wire alone and records every request; each is checked against what the case folder
recorded: keys, dtypes, shapes, the images bit for bit, the instruction, the state
constants (never the simulator's end-effector pose), one reset per episode, and the
executed prefix against the reply mapped independently here (gripper transform included).
"""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from gr00t_reference_server import (
    ACTION_KEYS,
    DIE,
    HORIZON,
    Canary,
    Gr00tReferenceServer,
    Raw,
    on,
)
from libero_native import native_first_observation
from ports import free_port

from pytest_libero.evidence.reader import read_actions, read_observations

pytestmark = pytest.mark.simulator
pytest_plugins = ["pytester"]

K = 3
OPTIONS = ["--libero-policy-option=state.x=0.25", "--libero-policy-option=state.gripper=0.03,-0.03"]
SMALL = ["--libero-budget-mode=decisions", "--libero-max-policy-calls=2",
         f"--libero-replan-interval={K}"]
STATE = {"state.x": [0.25], "state.y": [0.0], "state.z": [0.0], "state.roll": [0.0],
         "state.pitch": [0.0], "state.yaw": [0.0], "state.gripper": [0.03, -0.03]}
IMAGES = {"video.image": "agentview", "video.wrist_image": "robot0_eye_in_hand"}
LANGUAGE = "annotation.human.action.task_description"


def run_dir(pytester: pytest.Pytester) -> Path:
    [run] = (pytester.path / "libero-results" / "gr00t").iterdir()
    return run


def mapped(actions: dict[str, np.ndarray]) -> np.ndarray:
    """GR00T's reply as LIBERO's 7 columns, as GR00T's own LIBERO loop maps it."""
    chunk = np.stack([actions[k][0, :, 0].astype(np.float64) for k in ACTION_KEYS], axis=1)
    gripper = chunk[:, 6]
    chunk[:, 6] = -np.sign(gripper * 2 - 1)
    return chunk


PREFLIGHT = ["ping", "get_modality_config", "reset", "get_action", "reset"]
"""What the run sends before any case: the wire decided, one probe get_action."""


@pytest.mark.parametrize("generation", ["npy", "msgpack-numpy"])
def test_cases_send_what_the_folder_recorded_and_execute_the_mapped_reply(
    pytester: pytest.Pytester, generation: str,
) -> None:
    with Gr00tReferenceServer(generation=generation) as server:
        result = pytester.runpytest("--libero-profile=gr00t", f"--libero-endpoint={server.uri}",
                                    *OPTIONS, *SMALL)
    result.assert_outcomes(failed=2)  # native failures: every check below is ours
    run = run_dir(pytester)
    records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert [r["case"] for r in records] == ["libero_10-00", "libero_10-01"]
    assert json.loads((run / "run.json").read_text())["policy_server"] == {
        "transport": "gr00t", "endpoint": server.uri, "wire": generation,
        "wire_decided_by": "get_modality_config marker", "reply_horizon": HORIZON}
    for record in records:
        assert record["policy_metadata"]["wire"] == generation
        assert record["reply_horizon"] == HORIZON and "reply_note" not in record
    assert "reply_note" not in result.stdout.str() and "actions per call" not in result.stdout.str()

    # Preflight, then one episode per case: ping, the modality config and one reset,
    # then its calls.
    assert server.endpoints()[:len(PREFLIGHT)] == PREFLIGHT
    del server.requests[:len(PREFLIGHT)], server.actions[0]
    episodes: list[list[dict[str, Any]]] = []
    for request in server.requests:
        if request["endpoint"] == "reset":
            episodes.append([])
        elif request["endpoint"] == "get_action":
            episodes[-1].append(request["data"]["observation"])
    assert server.endpoints().count("reset") == len(records) == len(episodes)
    assert server.endpoints().count("get_modality_config") == len(records)
    assert [len(e) for e in episodes] == [r["counters"]["policy_calls"] for r in records] == [2, 2]

    declared = json.loads((run / "run.json").read_text())["plan"]["profile"]["request_layout"]
    assert set(declared["state"]) == set(STATE)
    for key, values in STATE.items():  # the options' values, as float32 holds them
        assert declared["state"][key]["values"] == np.float32(values).tolist()
    replies = iter(server.actions)
    eef = native_first_observation("libero_10", 0)["robot0_eef_pos"]
    for record, requests in zip(records, episodes, strict=True):
        assert record["state_fed"] == "constant"
        assert record["policy_metadata"]["modality_config"]["state"]["modality_keys"][0] == "x"
        case_dir = Path(record["evidence_dir"])
        observations = list(read_observations(case_dir))
        lines = [json.loads(x) for x in (case_dir / "observations.jsonl").read_text().splitlines()]
        for request, (_, images, proprio), line in zip(requests, observations, lines, strict=True):
            assert set(request) == {*IMAGES, LANGUAGE, *STATE}
            assert proprio is None
            for key, camera in IMAGES.items():
                sent = request[key]
                assert sent.dtype == np.uint8 and sent.shape == (1, 1, 256, 256, 3)
                kept = line["images"][camera]  # what the case folder recorded
                assert [1, 1, *kept["shape"]] == list(sent.shape) and kept["dtype"] == "uint8"
                assert np.array_equal(sent[0, 0], images[camera])
            assert request[LANGUAGE] == [line["language"]] == [record["entry"]["language"]]
            for key, spec in declared["state"].items():
                sent = request[key]
                assert str(sent.dtype) == spec["dtype"] == "float32"
                assert sent.shape == (1, 1, len(spec["values"]))
                assert sent[0, 0].tolist() == spec["values"]  # exactly the recorded constant
                # never the simulator's end-effector pose, in any component
                assert not np.isclose(sent[0, 0][:, None], eef[None, :], atol=1e-4).any()
        for chunk in read_actions(case_dir):
            raw = next(replies)
            assert chunk.raw_reply is not None
            assert all(np.array_equal(chunk.raw_reply[k], raw[k]) for k in ACTION_KEYS)
            assert chunk.actions is not None and np.array_equal(chunk.actions, mapped(raw))
            assert chunk.executed == K
            assert chunk.clipped is None  # the writer saw the controls run equal the prefix
            executed = chunk.executed_actions
            assert executed is not None and np.array_equal(executed, mapped(raw)[:K])
            assert set(executed[:, 6]) <= {-1.0, 1.0}

    identity = json.loads((run / "run.json").read_text())["plan"]["profile"]
    assert identity["state_fed"] == "constant"
    assert identity["request_layout"]["state"]["state.x"]["values"] == [0.25]
    assert json.loads((run / "summary.json").read_text())["state_fed"] == "constant"


def test_a_pickle_reply_errors_the_case_with_that_cause(pytester: pytest.Pytester) -> None:
    canary = pytester.path / "canary"
    payload = pickle.dumps(Canary(canary))
    # get_action 1 is preflight's probe; a server that answers pickle there is refused
    # before any case (test_gr00t_client.py), so this one turns at the case's first call.
    with Gr00tReferenceServer(on("get_action", Raw(payload), count=2)) as server:
        result = pytester.runpytest("--libero-profile=gr00t", f"--libero-endpoint={server.uri}",
                                    "--libero-scope=task_coverage", "--libero-suite=libero_10",
                                    "--libero-task-ids=0", *SMALL)
    result.assert_outcomes(errors=1)
    [record] = [json.loads(x) for x in (run_dir(pytester) / "results.jsonl").read_text().splitlines()]
    assert record["error"]["kind"] == "policy_transport"
    assert record["error"]["cause"] == "pickle_reply"
    assert "older pickle generation" in record["error"]["message"]
    assert f"{server.uri} (get_action)" in record["error"]["message"]
    result.stdout.fnmatch_lines(["*older pickle generation*"])
    assert not canary.exists()


def test_a_server_that_dies_stops_the_run_and_resume_finishes_it(pytester: pytest.Pytester) -> None:
    port = free_port()
    args = ["--libero-profile=gr00t", f"--libero-endpoint=tcp://127.0.0.1:{port}",
            "--libero-server-wait=2", "--libero-scope=development", "--libero-task-ids=0-2", *SMALL]
    # Resets 1 and 2 are preflight's; the third starts episode 1, the fourth episode 2.
    with Gr00tReferenceServer(on("reset", DIE, count=4), port=port):  # dies at episode 2
        result = pytester.runpytest(*args)
    assert result.ret == pytest.ExitCode.INTERRUPTED
    run = run_dir(pytester)
    summary = json.loads((run / "summary.json").read_text())
    assert summary["counts"] == {"selected": 3, "completed": 1, "success": 0, "failure": 1,
                                 "errored": 1, "unattempted": 1}
    [errored] = [json.loads(x) for x in (run / "results.jsonl").read_text().splitlines()
                 if json.loads(x)["outcome"] == "errored"]
    assert errored["error"]["cause"] == "connection_lost"
    assert f"tcp://127.0.0.1:{port} (reset) closed the connection" in errored["error"]["message"]
    assert f"--libero-resume={run}" in summary["stopped"]
    result.stdout.fnmatch_lines([f"*run stopped: the policy server at tcp://127.0.0.1:{port} "
                                 "stopped answering*"])

    with Gr00tReferenceServer(port=port) as server:
        finish = pytester.runpytest(*args, f"--libero-resume={run}")
    assert finish.ret == pytest.ExitCode.TESTS_FAILED  # native failures
    assert server.endpoints()[:len(PREFLIGHT)] == PREFLIGHT
    assert server.endpoints().count("reset") - 2 == 1  # only the unattempted case ran
    summary = json.loads((run / "summary.json").read_text())
    assert summary["counts"]["unattempted"] == 0 and summary["stopped"] is None


def test_a_server_answering_fewer_actions_than_k_is_said_once_everywhere(
    pytester: pytest.Pytester,
) -> None:
    """K = 8 (the profile's) against a server answering 4: not an error (the contract
    allows shorter chunks), but the case line, the record, the summary, the terminal and
    Allure say so."""
    with Gr00tReferenceServer(generation="msgpack-numpy", horizon=4) as server:
        result = pytester.runpytest(
            "--libero-profile=gr00t", f"--libero-endpoint={server.uri}",
            "--libero-scope=task_coverage", "--libero-suite=libero_10", "--libero-task-ids=0",
            "--libero-budget-mode=decisions", "--libero-max-policy-calls=2",
            f"--alluredir={pytester.path / 'allure'}")
    result.assert_outcomes(failed=1)
    note = "the server answers 4 actions per call; the profile executes up to 8"
    err = "\n".join(result.stderr.lines)
    assert f"pytest-libero: {note} (preflight's probe)" in err
    [record] = [json.loads(x) for x in (run_dir(pytester) / "results.jsonl").read_text().splitlines()]
    assert record["reply_horizon"] == 4 and record["reply_note"] == note
    assert [c["horizon"] for c in record["chunks"]] == [4, 4]
    assert record["counters"]["executed_controls"] == 8  # 4 per call, not 8
    summary = json.loads((run_dir(pytester) / "summary.json").read_text())
    assert summary["reply_horizon"] == {"fewest": 4, "most": 4, "short_cases": 1, "note": note}
    out = result.stdout.str()
    assert out.count(f"{note} (1 of 1 cases)") == 1  # the terminal summary, once
    assert "libero_10-00 finished in" in out and f"; {note}" in out  # the case's line
    [case] = [json.loads(p.read_text()) for p in (pytester.path / "allure").glob("*-result.json")
              if json.loads(p.read_text()).get("name", "").startswith("libero_10-00")]
    assert case["description"].count(note) == 1
