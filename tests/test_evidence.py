"""Case evidence (P10): stored observations decode bit-exactly, actions round-trip
exactly, the video plays, partial evidence survives errors, memory stays flat.

The unit tests drive CaseEvidence through the real episode loop with a fake
environment; one simulator test does the same through a real LIBERO case.
"""

from __future__ import annotations

import gc
import json
import os
import re
import signal
import tracemalloc
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from harness import proctree
from pytest_libero.episode.loop import run_episode
from pytest_libero.evidence.layout import (
    ACTIONS_NAME,
    INDEX_NAME,
    VIDEO_NAME,
    EvidenceError,
    stream_name,
)
from pytest_libero.evidence.reader import read_actions, read_observations
from pytest_libero.evidence.writer import CaseEvidence
from pytest_libero.policy.contract import Observation
from pytest_libero.protocol.budgets import StopRule, decisions_budget
from pytest_libero.protocol.hashing import array_sha256, sha256_file

imageio_ffmpeg = pytest.importorskip("imageio_ffmpeg")

CAMERAS = ("agentview", "robot0_eye_in_hand")


class NoisyEnv:
    """Random images that change every control; keeps nothing but a counter."""

    def __init__(self, seed: int = 0, proprio: bool = True, fail_at: int | None = None,
                 size: int = 256, block: int = 1) -> None:
        self.rng = np.random.default_rng(seed)
        self.proprio = proprio
        self.fail_at = fail_at
        self.size = size
        self.block = block  # >1: flat random blocks, which a lossy video keeps recognizable
        self.controls = 0

    def _image(self) -> np.ndarray:
        side = self.size // self.block
        image = self.rng.integers(0, 256, (side, side, 3), dtype=np.uint8)
        return np.ascontiguousarray(image.repeat(self.block, 0).repeat(self.block, 1))

    def observe(self, policy_calls: int, executed_controls: int) -> Observation:
        proprio = self.rng.standard_normal(9) if self.proprio else None
        images = {camera: self._image() for camera in CAMERAS}
        return Observation("put the soup in the basket", images, proprio, policy_calls, executed_controls)

    def frame(self) -> np.ndarray:
        return self._image()

    def step(self, action: np.ndarray, observe_next: bool = True) -> bool:
        self.controls += 1
        if self.fail_at is not None and self.controls == self.fail_at:
            raise RuntimeError("mujoco exploded")
        return False


class CheapEnv(NoisyEnv):
    """Smooth, moving images: cheap to encode, so long episodes stay fast."""

    def __init__(self) -> None:
        super().__init__(proprio=False)
        self.base = np.add.outer(np.arange(256), np.arange(256)).astype(np.uint8)

    def _image(self) -> np.ndarray:
        shifted = np.roll(self.base, self.controls, axis=1)
        return np.ascontiguousarray(np.stack([shifted, shifted.T, shifted // 2], axis=-1))


class Recorded:
    """A policy replying with random in-bound chunks; keeps hashes of what it saw and sent."""

    metadata: Mapping[str, Any] = {}

    def __init__(self, horizon: int = 4, seed: int = 1, keep: bool = True,
                 script: list[Any] | None = None) -> None:
        self.rng = np.random.default_rng(seed)
        self.horizon = horizon
        self.keep = keep
        self.script = list(script or [])
        self.seen: list[dict[str, str]] = []
        self.sent: list[np.ndarray | None] = []

    def reset(self) -> None:
        pass

    def infer(self, observation: Observation) -> Any:
        if self.keep:
            self.seen.append({k: array_sha256(v) for k, v in observation.images.items()})
        reply = self.script.pop(0) if self.script else None
        if reply == "stop":
            if self.keep:
                self.sent.append(None)
            return {"stop": True}
        actions = self.rng.uniform(-1, 1, (self.horizon, 7))
        if self.keep:
            self.sent.append(actions.copy())
        return {"actions": actions, "stop": reply == "act+stop"}

    def close(self) -> None:
        pass


def decode_video(path: Path) -> tuple[dict[str, Any], int]:
    frames = imageio_ffmpeg.read_frames(str(path))
    meta: dict[str, Any] = next(frames)
    count = sum(1 for _ in frames)
    return meta, count


def top_level_boxes(path: Path) -> list[str]:
    """MP4 box order: faststart puts moov before mdat so browsers can start at once."""
    data = path.read_bytes()
    boxes, offset = [], 0
    while offset + 8 <= len(data):
        size = int.from_bytes(data[offset:offset + 4], "big")
        boxes.append(data[offset + 4:offset + 8].decode("latin-1"))
        if size == 1:
            size = int.from_bytes(data[offset + 8:offset + 16], "big")
        if size < 8:
            break
        offset += size
    return boxes


def test_observations_actions_and_video_round_trip(tmp_path: Path) -> None:
    # D=5, K=3, horizon 4: calls 1-5 execute 3,3,0 (stop only),3,3 = 12 controls.
    policy = Recorded(horizon=4, script=[None, "act+stop", "stop", None, None])
    evidence = CaseEvidence(tmp_path / "case", video_stride=1)
    result = run_episode(NoisyEnv(), policy, decisions_budget(5, 3), StopRule(None),
                         init_controls=10, listener=evidence)
    summary = evidence.close()
    assert result.outcome == "failure" and result.counters.executed_controls == 12

    decoded = list(read_observations(tmp_path / "case"))  # verifies every hash
    assert [call for call, _, _ in decoded] == [1, 2, 3, 4, 5]
    index = [json.loads(line) for line in (tmp_path / "case" / INDEX_NAME).read_text().splitlines()]
    for (_, images, proprio), line, seen in zip(decoded, index, policy.seen):
        assert set(images) == set(CAMERAS)
        for camera, image in images.items():
            assert image.dtype == np.uint8 and image.shape == (256, 256, 3)
            # Decoded == indexed == what the policy was actually given.
            assert array_sha256(image) == line["images"][camera]["sha256"] == seen[camera]
        assert proprio is not None and proprio.dtype == np.float64 and proprio.shape == (9,)
        assert line["language"] == "put the soup in the basket"

    chunks = list(read_actions(tmp_path / "case"))
    assert [(c.call, c.executed, c.stop, c.complete) for c in chunks] == [
        (1, 3, False, True), (2, 3, True, True), (3, 0, True, True), (4, 3, False, True), (5, 3, False, True)]
    for chunk, sent in zip(chunks, policy.sent):
        if sent is None:
            assert chunk.actions is None and chunk.horizon == 0
        else:
            assert chunk.actions is not None and chunk.actions.dtype == np.float64
            assert chunk.actions.tobytes() == sent.tobytes()  # bit-exact, full chunk
            assert chunk.executed_actions is not None and chunk.executed_actions.shape == (3, 7)

    meta, frames = decode_video(tmp_path / "case" / VIDEO_NAME)
    assert frames == 1 + 12 == summary["video"]["frames"]
    assert meta["codec"] == "h264" and meta["pix_fmt"].startswith("yuv420p") and meta["fps"] == 20
    assert tuple(meta["size"]) == (256, 256)
    boxes = top_level_boxes(tmp_path / "case" / VIDEO_NAME)
    assert boxes.index("moov") < boxes.index("mdat")

    assert summary["level"] == "full"  # the default level keeps every observation
    assert summary["observations"]["count"] == 5
    assert {c: s["frames"] for c, s in summary["observations"]["streams"].items()} == {c: 5 for c in CAMERAS}
    assert summary["actions"] == {"path": ACTIONS_NAME, "replies": 5, "executed_controls": 12}
    for name, info in summary["files"].items():
        assert sha256_file(tmp_path / "case" / name) == info["sha256"]
    assert set(summary["files"]) == {INDEX_NAME, ACTIONS_NAME, VIDEO_NAME, *map(stream_name, CAMERAS)}
    json.dumps(summary)  # JSON-ready
    assert evidence.close() == summary  # idempotent


def test_video_stride_keeps_first_observation_frame(tmp_path: Path) -> None:
    env = NoisyEnv(proprio=False, size=64, block=8)
    policy = Recorded(horizon=5)
    with CaseEvidence(tmp_path / "case", video_stride=4) as evidence:
        run_episode(env, policy, decisions_budget(3, 5), StopRule(None), init_controls=0,
                    listener=evidence)
    _, frames = decode_video(tmp_path / "case" / VIDEO_NAME)
    assert frames == 1 + 15 // 4
    # Lossy, so compare loosely: the first video frame is the first agentview image.
    (_, images, proprio), *_ = read_observations(tmp_path / "case")
    video = imageio_ffmpeg.read_frames(str(tmp_path / "case" / VIDEO_NAME))
    assert next(video)["size"] == (64, 64)
    frame0 = np.frombuffer(next(video), np.uint8).reshape(64, 64, 3)
    video.close()
    assert proprio is None
    error = np.abs(frame0.astype(int) - images["agentview"].astype(int)).mean()
    other = np.abs(frame0.astype(int) - images["robot0_eye_in_hand"].astype(int)).mean()
    assert error < 10 < 50 < other


def test_environment_error_mid_chunk_keeps_partial_evidence(tmp_path: Path) -> None:
    # K=4: call 1 executes 4, call 2 dies on its 2nd control (control 6).
    policy = Recorded(horizon=4)
    evidence = CaseEvidence(tmp_path / "case")
    result = run_episode(NoisyEnv(fail_at=6), policy, decisions_budget(5, 4), StopRule(None),
                         init_controls=0, listener=evidence)
    summary = evidence.close()
    assert result.outcome == "errored" and result.counters.executed_controls == 5
    assert [call for call, _, _ in read_observations(tmp_path / "case")] == [1, 2]
    chunks = list(read_actions(tmp_path / "case"))
    assert [(c.call, c.executed, c.complete) for c in chunks] == [(1, 4, True), (2, 1, False)]
    second = policy.sent[1]
    assert second is not None and chunks[1].actions is not None
    # The unrecorded chunk keeps exactly the control that ran.
    assert chunks[1].actions.tobytes() == second[:1].tobytes()
    assert decode_video(tmp_path / "case" / VIDEO_NAME)[1] == 1 + 5 == summary["video"]["frames"]


def test_close_after_exception_escaping_the_episode(tmp_path: Path) -> None:
    class RenderDies(NoisyEnv):
        def frame(self) -> np.ndarray:
            if self.controls == 7:
                raise KeyboardInterrupt  # nothing in the loop catches this
            return super().frame()

    evidence = CaseEvidence(tmp_path / "case")
    try:
        run_episode(RenderDies(), Recorded(horizon=3), decisions_budget(5, 3), StopRule(None),
                    init_controls=0, listener=evidence)
    except KeyboardInterrupt:
        pass
    finally:
        summary = evidence.close()
    assert [call for call, _, _ in read_observations(tmp_path / "case")] == [1, 2, 3]
    # Controls 1-6 completed with their replies; control 7 ran, its frame did not.
    chunks = list(read_actions(tmp_path / "case"))
    assert [(c.call, c.executed, c.complete) for c in chunks] == [(1, 3, True), (2, 3, True), (3, 1, False)]
    assert decode_video(tmp_path / "case" / VIDEO_NAME)[1] == 1 + 6 == summary["video"]["frames"]


def test_ffmpeg_dying_errors_the_episode_with_a_named_cause_and_leaves_no_process(
    tmp_path: Path,
) -> None:
    class KillsVideo(NoisyEnv):
        evidence: CaseEvidence

        def step(self, action: np.ndarray, observe_next: bool = True) -> bool:
            if self.controls == 2:
                video = self.evidence._video
                assert video is not None
                os.kill(video.pid, signal.SIGKILL)
                # Gone before the next frame, as it is after a real control (~0.1 s): the
                # encoder's wide pipe would otherwise take this fake env's next frames.
                video._proc.wait(10)
            return super().step(action, observe_next)

    env = KillsVideo(size=64)
    evidence = env.evidence = CaseEvidence(tmp_path / "case")
    result = run_episode(env, Recorded(horizon=5), decisions_budget(4, 5), StopRule(None),
                         init_controls=0, listener=evidence)
    pids = [w.pid for w in evidence._writers()]
    assert result.outcome == "errored" and result.error is not None
    assert result.error["kind"] == "evidence"
    assert re.search(r"episode\.mp4: writing frame \d+ failed", result.error["message"])
    assert "exit status -9" in result.error["message"]
    with pytest.raises(EvidenceError, match=r"episode\.mp4") as closing:
        evidence.close()
    assert closing.value.summary is not None
    assert not any(proctree.unreaped(pid) for pid in pids)  # not even a zombie
    # The lossless streams were finished normally and decode.
    assert [call for call, _, _ in read_observations(tmp_path / "case")] == [1]


def test_ffmpeg_refusing_options_reports_its_stderr(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from pytest_libero.evidence import ffmpeg as module

    monkeypatch.setitem(module.LOSSLESS_CODECS, "ffv1", ["-c:v", "ffv1", "-level", "3", "-slices", "7"])
    evidence = CaseEvidence(tmp_path / "case")
    run_episode(NoisyEnv(), Recorded(), decisions_budget(2, 2), StopRule(None),
                init_controls=0, listener=evidence)
    with pytest.raises(EvidenceError) as raised:  # ffmpeg refuses when the stream is finished
        evidence.close()
    message = str(raised.value)
    assert stream_name("robot0_eye_in_hand") in message and "stderr tail" in message
    assert "Unsupported number 7 of slices" in message


def test_folder_with_evidence_is_never_overwritten(tmp_path: Path) -> None:
    CaseEvidence(tmp_path / "case").close()
    with pytest.raises(EvidenceError, match="already holds evidence"):
        CaseEvidence(tmp_path / "case")


def test_read_back_detects_a_tampered_frame(tmp_path: Path) -> None:
    with CaseEvidence(tmp_path / "case") as evidence:
        run_episode(NoisyEnv(size=32), Recorded(), decisions_budget(2, 2), StopRule(None),
                    init_controls=0, listener=evidence)
    index = tmp_path / "case" / INDEX_NAME
    lines = index.read_text().splitlines()
    first = json.loads(lines[1])
    first["images"]["agentview"]["sha256"] = "0" * 64
    index.write_text("\n".join([lines[0], json.dumps(first), *lines[2:]]) + "\n")
    with pytest.raises(EvidenceError, match=r"agentview\.mkv: frame 1 \(call 2\)"):
        list(read_observations(tmp_path / "case"))


def _peak_bytes(folder: Path, controls: int) -> int:
    gc.collect()
    tracemalloc.start()
    try:
        evidence = CaseEvidence(folder)
        result = run_episode(CheapEnv(), Recorded(horizon=5, keep=False),
                             decisions_budget(controls // 5, 5), StopRule(None),
                             init_controls=0, listener=evidence)
        summary = evidence.close()
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.counters.executed_controls == controls
    assert summary["video"]["frames"] == 1 + controls
    return peak


def test_memory_does_not_grow_with_episode_length(tmp_path: Path) -> None:
    _peak_bytes(tmp_path / "warmup", 10)
    short = _peak_bytes(tmp_path / "short", 50)
    long = _peak_bytes(tmp_path / "long", 500)
    assert long <= 1.5 * short, (short, long)


@pytest.mark.simulator
def test_real_libero_case_evidence(tmp_path: Path) -> None:
    from pytest_libero.catalog.selection import SelectionRequest
    from pytest_libero.config.plan import make_plan
    from pytest_libero.config.profiles import load_profile
    from pytest_libero.episode.case import run_case

    profile = load_profile("zero")
    plan = make_plan(profile, SelectionRequest("task_coverage", "libero_object", (0,)),
                     budget_mode="decisions", max_policy_calls=2, replan_interval=3,
                     adapter="libero", render="consumed", video_stride=1)
    inner = profile.build_policy()
    delivered: list[dict[str, str]] = []

    class Watching:
        metadata = inner.metadata

        def reset(self) -> None:
            inner.reset()

        def infer(self, observation: Observation) -> Any:
            delivered.append({k: array_sha256(v) for k, v in observation.images.items()})
            return inner.infer(observation)

        def close(self) -> None:
            inner.close()

    evidence = CaseEvidence(tmp_path / "case")
    try:
        record = run_case(plan, plan.entries[0], Watching(), listener=evidence)
    finally:
        summary = evidence.close()
    assert record["outcome"] == "failure", record["error"]
    assert record["counters"]["executed_controls"] == 6

    decoded = list(read_observations(tmp_path / "case"))  # every frame checked against its hash
    assert [call for call, _, _ in decoded] == [1, 2]
    for (_, images, proprio), seen in zip(decoded, delivered):
        assert {k: array_sha256(v) for k, v in images.items()} == seen
        assert proprio is None
    assert set(decoded[0][1]) == set(CAMERAS)

    assert decode_video(tmp_path / "case" / VIDEO_NAME)[1] == 1 + 6 == summary["video"]["frames"]
    chunks = list(read_actions(tmp_path / "case"))
    assert [(c.call, c.horizon, c.executed) for c in chunks] == [(1, 5, 3), (2, 5, 3)]


def test_evidence_never_closed_is_still_finalized(tmp_path: Path) -> None:
    evidence = CaseEvidence(tmp_path / "case")
    run_episode(NoisyEnv(size=32), Recorded(horizon=2), decisions_budget(3, 2), StopRule(None),
                init_controls=0, listener=evidence)
    pids = [w.pid for w in evidence._writers()]
    del evidence
    gc.collect()
    assert not any(proctree.unreaped(pid) for pid in pids)  # not even a zombie
    # ffmpeg saw end of input and wrote complete files: the MP4 plays, frames decode.
    assert decode_video(tmp_path / "case" / VIDEO_NAME)[1] == 1 + 6
    assert [call for call, _, _ in read_observations(tmp_path / "case")] == [1, 2, 3]
