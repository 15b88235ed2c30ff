"""Issue 7: rendering only what is consumed changes no delivered byte and no outcome."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.simulator
pytest_plugins = ["pytester"]

DATA = Path(__file__).parent / "data"


def run(pytester: pytest.Pytester, render: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    result = pytester.runpytest(
        "--libero-profile=replay", f"--libero-policy-option=actions={DATA / 'replay_libero_object_00.npy'}",
        "--libero-scope=task_coverage", "--libero-suite=libero_object", "--libero-task-ids=0",
        f"--libero-render={render}", f"--libero-results=results-{render}",
    )
    result.assert_outcomes(passed=1)
    [case] = (pytester.path / f"results-{render}").glob("replay/*/cases/libero_object-00")
    record = json.loads((case / "episode.json").read_text())
    index = [json.loads(line) for line in (case / "observations.jsonl").read_text().splitlines()]
    return record, index


def simulated(chunks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Chunk summaries less the reply's measured wall-clock latency, which no two runs share."""
    return [{k: v for k, v in chunk.items() if k != "latency_s"} for chunk in chunks]


def test_skipping_renders_keeps_every_delivered_byte(pytester: pytest.Pytester) -> None:
    everything, seen_all = run(pytester, "all")
    consumed, seen_consumed = run(pytester, "consumed")
    # Same native outcome and counters, and the same images by hash, call by call.
    for key in ("outcome", "termination", "truncation", "counters"):
        assert consumed[key] == everything[key], key
    assert simulated(consumed["chunks"]) == simulated(everything["chunks"])
    assert consumed["counters"]["first_success_control"] == 71
    assert [line["images"] for line in seen_consumed] == [line["images"] for line in seen_all]
    assert len(seen_consumed) == 15
    # And the renders nobody consumed were skipped: the wrist camera renders once after
    # settling and once per chunk; agentview also renders every control for the video.
    assert everything["renders"] is None
    assert consumed["renders"] == {"agentview": 1 + 71, "robot0_eye_in_hand": 1 + 15}
    assert consumed["evidence"]["video"]["frames"] == everything["evidence"]["video"]["frames"] == 72


def test_each_control_samples_each_camera_exactly_once_at_a_fixed_substep() -> None:
    """The premise of render gating: a control's image is sampled inside that control.

    If robosuite's sampling phase ever drifted across control boundaries, a gated
    control could deliver an older image; this pins the premise over 300 controls.
    """
    from collections import Counter

    import numpy as np

    from pytest_libero.adapters.libero import LiberoEpisode
    from pytest_libero.catalog.entries import load_catalog

    entry = load_catalog().suite_entries("libero_10")[0]
    episode = LiberoEpisode(entry, track="rgb", control_cap=300, render="consumed")
    env = episode._env.env
    samples: list[tuple[int, int]] = []
    substep = [0]
    for camera, gate in episode.gates.items():
        def record(cache: Any, camera: str = camera) -> np.ndarray:
            samples.append((env.timestep, substep[0]))
            return np.zeros((256, 256, 3), np.uint8)
        gate.sensor = record
        gate.wanted = True
    physics_step = env.sim.step

    def counted() -> None:
        substep[0] += 1
        physics_step()

    env.sim.step = counted
    try:
        first = env.timestep
        for _ in range(300):
            substep[0] = 0
            episode.step(np.array([0, 0, 0, 0, 0, 0, -1.0]))
    finally:
        episode.close()
    per_control = Counter(t for t, _ in samples)
    assert all(per_control[first + n] == 2 for n in range(1, 301))  # two cameras, once each
    assert len({s for _, s in samples}) == 1  # the same substep every time
