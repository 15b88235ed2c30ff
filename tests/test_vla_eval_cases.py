"""Real LIBERO cases driven by a real vla-eval 0.8 model server (tests/vla_eval_server.py),
and the observations it received held against vla-eval's own LIBERO observation code.

The server asks for the wrist image and logs what vla-eval decoded of each observation.
Its first observation must be, byte for byte, what ``vla_eval.benchmarks.libero``'s
``make_obs`` makes of LIBERO's own first observation of the scene (P4), and every one
must be what the case folder recorded as delivered. Each reply is executed as vla-eval's
LIBERO executes it.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from libero_native import native_first_observation

from harness.runs import run_folder, run_records
from harness.servers import free_port, serving, vla_eval_argv
from pytest_libero.evidence.reader import read_actions, read_observations

pytestmark = pytest.mark.simulator
pytest_plugins = ["pytester"]
pytest.importorskip("vla_eval")

SUITE, INDEX, CALLS = "libero_spatial", 0, 3


def digest(image: np.ndarray) -> str:
    return hashlib.sha256(np.ascontiguousarray(image).tobytes()).hexdigest()


def vla_eval_make_obs(raw: dict[str, Any], name: str) -> dict[str, Any]:
    """vla-eval's own LIBERO observation of ``raw``, wrist image asked for; its module's
    import sets EGL variables with setdefault, which are put back as they were."""
    before = dict(os.environ)
    try:
        from vla_eval.benchmarks.libero.benchmark import LIBEROBenchmark
    finally:
        os.environ.clear()
        os.environ.update(before)
    made: dict[str, Any] = LIBEROBenchmark(suite=SUITE, send_wrist_image=True).make_obs(
        raw, {"name": name})
    return made


def libero_task_name() -> str:
    """The task's name as vla-eval's LIBERO ``get_tasks`` reads it: LIBERO's own Task."""
    from libero.libero import benchmark

    name: str = benchmark.get_benchmark_dict()[SUITE]().get_task(INDEX).language
    return name


@pytest.fixture
def server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    log = tmp_path / "seen.jsonl"
    port = free_port()
    with serving(vla_eval_argv(port, "--args.wrist=true", f"--args.log={log}"), port, poll_s=0.2,
                 health_path="/health") as served:
        yield served.uri, log


def test_a_vla_eval_server_drives_real_cases_and_sees_what_vla_eval_s_libero_sends(
    pytester: pytest.Pytester, server: tuple[str, Path],
) -> None:
    uri, log = server
    result = pytester.runpytest(
        "--libero-profile=vla-eval", f"--libero-endpoint={uri}", "--libero-scope=task_coverage",
        f"--libero-suite={SUITE}", f"--libero-task-ids={INDEX}", "--libero-budget-mode=decisions",
        f"--libero-max-policy-calls={CALLS}", "--libero-video-stride=10")
    result.assert_outcomes(failed=1)  # the cap, not an error
    run = run_folder(pytester.path / "libero-results", "vla-eval")
    [record] = run_records(run)
    assert record["error"] is None and record["counters"]["policy_calls"] == CALLS
    assert record["policy_metadata"]["model_server"] == "ProbeServer"
    served = json.loads((run / "run.json").read_text())["policy_server"]
    assert served["observation_params"]["send_wrist_image"] is True
    seen = [json.loads(line) for line in log.read_text().splitlines()]
    assert [s["step"] for s in seen] == list(range(CALLS))
    entry = record["entry"]
    # The task as vla-eval's LIBERO names it, less its episode_idx: the protocol never says
    # which init state (P5).
    assert all(s["task"] == {"name": entry["language"], "suite": SUITE, "task_id": INDEX}
               for s in seen)

    # What vla-eval's LIBERO sends for this scene's first observation, byte for byte, under
    # the name its get_tasks() gives the task (LIBERO's Task.language).
    theirs = vla_eval_make_obs(native_first_observation(SUITE, INDEX), libero_task_name())
    assert seen[0]["keys"] == sorted(theirs) == ["images", "task_description"]
    assert seen[0]["images"] == {camera: digest(image) for camera, image in theirs["images"].items()}
    assert all(s["task_description"] == theirs["task_description"] for s in seen)

    # Every observation the server got is the one the case folder recorded as delivered.
    case_dir = Path(record["evidence_dir"])
    delivered = list(read_observations(case_dir))
    assert [s["images"] for s in seen] == [
        {"agentview": digest(images["agentview"]), "wrist": digest(images["robot0_eye_in_hand"])}
        for _, images, _ in delivered]

    # Each reply executed as vla-eval's LIBERO executes it; the server's own vector kept.
    for chunk in read_actions(case_dir):
        assert chunk.raw_reply is not None and chunk.raw_reply["actions"].dtype == np.float32
        assert chunk.actions is not None and chunk.actions.shape == (1, 7)
        assert chunk.actions[0, 6] == -1.0 and chunk.raw_reply["actions"][6] == np.float32(-0.25)
        assert np.array_equal(chunk.actions[0, :6], chunk.raw_reply["actions"][:6].astype(np.float64))
