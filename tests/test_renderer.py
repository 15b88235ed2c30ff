"""The renderer fingerprint as data: what equals what, and the refusals where runs meet.

Run folders here are written by hand (no simulator); the real fingerprint, measured by
real rendering, is tested in test_renderer_cases.py.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from pytest_libero.audit.compare import MISMATCH, NOT_VERIFIABLE, VERIFIED, Verdict
from pytest_libero.audit.rendering import judged, rendering
from pytest_libero.evidence.renderer import (
    IDENTITY_KEYS,
    REFERENCE_FRAME,
    describe,
    identity,
    known,
    same,
    scene_sha256,
    standing,
    unusable,
)
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.identity import protocol_identity
from pytest_libero.report.terminal import summary_lines
from pytest_libero.results.gate import evaluate_gates, load_baseline
from pytest_libero.results.merge import merge_runs
from pytest_libero.results.renderers import (
    conflict,
    joined,
    renderer_summary,
    renderer_uses,
    session_use,
)

MESA = {"frame": REFERENCE_FRAME, "sha256": "a" * 64, "backend": "egl", "vendor": "Mesa/X.org",
        "renderer": "llvmpipe (LLVM 15.0.6, 256 bits)",
        "version": "4.5 (Compatibility Profile) Mesa 22.3.6"}
NVIDIA = {**MESA, "sha256": "b" * 64, "vendor": "NVIDIA Corporation",
          "renderer": "NVIDIA H200/PCIe/SSE2", "version": "4.6.0 NVIDIA 550.54.15"}
CASES = ["libero_10-00", "libero_10-01"]


def record(case: str, renderer: dict[str, Any] | None, worker: str = "main",
           outcome: str = "success") -> dict[str, Any]:
    identity = {} if renderer is None else {"renderer": renderer}
    return {"case": case, "outcome": outcome, "entry": {"suite": "libero_10"},
            "identity": identity, "worker": worker}


def run_folder(path: Path, records: list[dict[str, Any]], renderer: dict[str, Any] | None = MESA) -> Path:
    path.mkdir(parents=True)
    run: dict[str, Any] = {
        "protocol_identity": protocol_identity(),
        "plan": {"profile": {"name": "zero", "sha256": "abc"}, "selection": {"scope": "smoke"},
                 "selection_cases": CASES, "cases": CASES, "shard": None,
                 "budget_mode": "decisions", "max_policy_calls": 1, "replan_interval": 1,
                 "track": "rgb", "evidence_class": "infrastructure"},
    }
    if renderer is not None:
        run["renderer"] = renderer
    (path / "run.json").write_text(json.dumps(run))
    (path / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def test_the_reference_scene_is_pinned() -> None:
    """Editing the scene moves every fingerprint: do it on purpose, with a new frame name
    and the shipped table measured again."""
    assert REFERENCE_FRAME == "pytest-libero-reference-frame/1"
    assert scene_sha256() == "bf266d97ee6fc80ab4ae65c5097885da96376293b6269fdf4df20170ed3de3b8"


def test_one_renderer_only_when_every_identity_key_and_the_frame_agree() -> None:
    assert same(MESA, dict(MESA))
    for key in IDENTITY_KEYS:
        assert not same(MESA, {**MESA, key: "edited"}), key
    failed = {**MESA, "sha256": None, "error": "EGL_NOT_INITIALIZED"}
    assert not same(failed, failed)  # a frame never rendered equals nothing, itself included
    assert not same(None, None)
    assert identity({**MESA, "cameras": {}, "seconds": 1.0}) == MESA


def test_descriptions_name_the_stack_or_why_there_is_none() -> None:
    assert describe(MESA) == ("llvmpipe (LLVM 15.0.6, 256 bits), 4.5 (Compatibility Profile) "
                              "Mesa 22.3.6 via egl, frame aaaaaaaaaaaa")
    assert describe(None).startswith("not recorded")
    assert describe({**MESA, "sha256": None, "error": "RuntimeError: no EGL\ntrace"}) == (
        "not measured (RuntimeError: no EGL)")
    assert standing(NVIDIA).startswith("not one this package has measured")


def test_a_machine_that_cannot_render_is_one_line_naming_the_library() -> None:
    no_egl = {**MESA, "sha256": None, "error": "ImportError: Cannot initialize a EGL device display."}
    line = unusable(no_egl)
    assert line is not None and "MUJOCO_GL=egl" in line and "apt-get install libegl1" in line
    assert "Cannot initialize a EGL device display" in line and "\n" not in line
    no_osmesa = {**MESA, "backend": "osmesa", "sha256": None,
                 "error": "AttributeError: 'NoneType' object has no attribute 'glGetError'"}
    assert "libosmesa6" in (unusable(no_osmesa) or "")
    # Rendered, or failed for a reason other than the GL stack: the run goes on.
    assert unusable(MESA) is None
    assert unusable({**MESA, "sha256": None, "error": "not measured here"}) is None
    assert unusable({**MESA, "sha256": None, "error": "ValueError: global name"}) is None


def test_the_shipped_table_is_measured_fingerprints_of_this_frame() -> None:
    table = json.loads((Path(__file__).parents[1] / "pytest_libero" / "data" / "renderers.json")
                       .read_text())
    assert table["renderers"], "the package ships at least the renderer it was built on"
    for entry in table["renderers"]:
        assert entry["frame"] == REFERENCE_FRAME and len(entry["sha256"]) == 64
        assert known(entry) is not None and entry["measured"]["on"]
        assert standing(entry) == f"known: {entry['name']}"
    # A stack never measured is said to be so, not given a made-up fingerprint.
    assert any("NVIDIA" in note for note in table["not_yet_measured"]) or any(
        "NVIDIA" in entry["vendor"] for entry in table["renderers"])


def test_images_compare_under_one_measured_renderer_or_where_none_was_recorded() -> None:
    ours = renderer_uses([record("libero_10-00", MESA, "gw0"), record("libero_10-01", MESA, "gw1")])
    assert len(ours) == 1 and ours[0].workers == ["gw0", "gw1"] and conflict(ours) is None
    old = renderer_uses([record("libero_10-00", None), record("libero_10-01", None)])
    assert conflict(old) is None  # readable: an old folder compares with old folders only
    mixed = conflict(joined(old, ours))
    assert mixed is not None and "not recorded" in mixed and "llvmpipe" in mixed
    failed = {**MESA, "sha256": None, "error": "timeout"}
    assert "could not be fingerprinted" in str(conflict(renderer_uses([record("x", failed)])))
    assert conflict(joined(ours, [session_use(NVIDIA)])) is not None


def test_folders_without_a_finished_case_have_no_images_to_compare() -> None:
    """Runs killed before their first case ended merge: it used to say "the images come
    from different renderers: ." with no renderer to name."""
    assert conflict(joined(renderer_uses([]), renderer_uses([]))) is None
    assert conflict(joined(renderer_uses([]), [session_use(NVIDIA)])) is None


@pytest.mark.parametrize("edit", [
    {"renderer": "NVIDIA H200/PCIe/SSE2"},  # a fake description, same hash
    {"sha256": "c" * 64},  # an edited fingerprint, same description
], ids=["fake-description", "edited-fingerprint"])
def test_merge_and_the_baseline_gate_refuse_another_renderer(tmp_path: Path,
                                                              edit: dict[str, Any]) -> None:
    other = {**MESA, **edit}
    a = run_folder(tmp_path / "a", [record("libero_10-00", MESA)])
    b = run_folder(tmp_path / "b", [record("libero_10-01", other)])
    with pytest.raises(SetupError) as refused:
        merge_runs([a, b], tmp_path / "merged")
    assert "different renderers" in str(refused.value)
    assert describe(MESA) in str(refused.value) and describe(other) in str(refused.value)
    assert not (tmp_path / "merged").exists()  # a refusal leaves nothing behind
    with pytest.raises(SetupError) as refused:
        load_baseline(b, protocol_identity(), against=[session_use(MESA)])
    assert "--libero-baseline" in str(refused.value) and describe(other) in str(refused.value)
    # The gate at the end compares the records themselves.
    baseline = {r["case"]: r for r in [record("libero_10-00", other)]}
    current = {r["case"]: r for r in [record("libero_10-00", MESA, outcome="failure")]}
    summary = {"counts": {"unattempted": 0, "errored": 0}}
    [verdict] = evaluate_gates(summary, current, min_success=None, baseline=baseline,
                               alpha=0.05)
    assert not verdict.passed and "baseline gate FAILED" in verdict.lines[0]
    assert describe(other) in verdict.lines[0]


def test_a_run_whose_workers_rendered_differently_says_so_and_is_not_merged(tmp_path: Path) -> None:
    run = run_folder(tmp_path / "mixed", [record("libero_10-00", MESA, "gw0"),
                                          record("libero_10-01", NVIDIA, "gw1")])
    with pytest.raises(SetupError, match="different renderers"):
        merge_runs([run], tmp_path / "merged")
    uses = renderer_uses([record("libero_10-00", MESA, "gw0"), record("libero_10-01", NVIDIA, "gw1")])
    block = renderer_summary(uses, {"renderer": MESA})
    assert block["mixed"] is True
    lines = summary_lines({"counts": {"selected": 2}, "suites": {}, "renderer": block,
                           "overall": {"rate": None}})
    assert any(line.startswith("RENDERERS DIFFER") for line in lines)
    assert any("gw1: 1 case" in line and "NVIDIA H200" in line for line in lines)


def test_old_folders_merge_with_each_other_flagged_never_with_a_recorded_renderer(
        tmp_path: Path) -> None:
    old_a = run_folder(tmp_path / "old-a", [record("libero_10-00", None)], renderer=None)
    old_b = run_folder(tmp_path / "old-b", [record("libero_10-01", None)], renderer=None)
    merged = merge_runs([old_a, old_b], tmp_path / "merged")
    summary = json.loads((merged / "summary.json").read_text())
    assert summary["renderer"]["not_recorded"] == 2 and not summary["renderer"]["mixed"]
    assert any(line.startswith("renderer: not recorded") for line in summary_lines(summary))
    new = run_folder(tmp_path / "new", [record("libero_10-01", MESA)])
    with pytest.raises(SetupError, match="not recorded"):
        merge_runs([old_a, new], tmp_path / "merged-2")
    with pytest.raises(SetupError, match="not recorded"):
        load_baseline(old_a, protocol_identity(), against=[session_use(MESA)])


def verified(case: str = "libero_10-00") -> Verdict:
    return Verdict(case, VERIFIED, "3 deliveries and 6 controls re-executed, outcome failure",
                   None, {"images_compared": False})


def test_verify_answers_renderer_differs_instead_of_a_mismatch() -> None:
    here = {**MESA, "cameras": {}, "seconds": 1.0}
    seen = rendering(record("libero_10-00", {**MESA, "renderer": "NVIDIA H200"}), here, None)
    assert not seen.images
    verdict = judged(verified(), seen)
    assert verdict.status == NOT_VERIFIABLE
    assert verdict.reason.startswith("renderer differs (run: NVIDIA H200, 4.5 (Compatibility "
                                     "Profile) Mesa 22.3.6 via egl, frame aaaaaaaaaaaa, here: "
                                     "llvmpipe")
    # A difference rendering cannot explain (counters, a file) stays a mismatch.
    physics = Verdict("libero_10-00", MISMATCH, "executed_controls differs at call 2",
                      {"field": "executed_controls"})
    assert judged(physics, seen).status == MISMATCH
    # The same renderer: images are compared, and a mismatch stays a mismatch.
    same_here = rendering(record("libero_10-00", MESA), here, None)
    assert same_here.images and same_here.differs is None
    image = Verdict("libero_10-00", MISMATCH, "agentview differs at call 2", {"field": "agentview"})
    assert judged(image, same_here) == image


def test_verify_flags_records_without_a_fingerprint() -> None:
    old = record("libero_10-00", None)
    seen = rendering(old, MESA, None)
    assert seen.images and seen.unrecorded
    image = Verdict("libero_10-00", MISMATCH, "agentview differs at call 2", {"field": "agentview"})
    assert "recorded no renderer fingerprint" in judged(image, seen).reason
    other_backend = rendering(old, MESA, "rendered with MUJOCO_GL=osmesa (run) vs egl here")
    assert judged(verified(), other_backend).status == NOT_VERIFIABLE
    assert "renderer differs (run: not recorded, rendered with MUJOCO_GL=osmesa" in judged(
        verified(), other_backend).reason


def test_the_allure_environment_names_the_renderer() -> None:
    from pytest_libero.report.allure import environment_items

    items = dict(environment_items({"renderer": NVIDIA}))
    assert items["renderer"].startswith("NVIDIA H200/PCIe/SSE2, 4.6.0 NVIDIA 550.54.15 via egl")
    assert "not one this package has measured" in items["renderer"]
    assert "renderer" not in dict(environment_items({}))  # a run from before fingerprints
