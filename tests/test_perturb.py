"""Generated perturbations without the simulator: the option, the seeded draw, the level
table's growth, the image noise, case ids and selection, identities, the report's keys."""

from __future__ import annotations

import numpy as np
import pytest
from synthetic import synthetic_record

from pytest_libero.catalog.case_id import CaseId
from pytest_libero.catalog.entries import Entry, load_catalog
from pytest_libero.catalog.selection import SelectionRequest, select
from pytest_libero.config.plan import make_plan
from pytest_libero.config.profiles import load_profile
from pytest_libero.perturb.kinds.noise import corrupt, noise_generator
from pytest_libero.perturb.levels import LEVELS, parse_perturbations, perturb_identity, table
from pytest_libero.perturb.registry import draw, names
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.identity import ood_identity, protocol_identity
from pytest_libero.report.allure import case_tree
from pytest_libero.results.summary import summarize


def test_the_option_reads_kinds_and_levels_and_refuses_the_rest() -> None:
    assert parse_perturbations("noise:1, camera:2") == (("camera", 2), ("noise", 1))
    assert len(parse_perturbations("all")) == len(names()) * len(LEVELS) == 36
    for bad in ("camera", "camera:5", "colour:1", "camera:x", ""):
        with pytest.raises(SetupError, match="--libero-perturb"):
            parse_perturbations(bad)


def test_the_draw_is_a_function_of_kind_level_and_case() -> None:
    assert draw("camera", 2, "libero_10-03") == draw("camera", 2, "libero_10-03")
    assert draw("camera", 2, "libero_10-03").seed != draw("camera", 2, "libero_10-04").seed
    assert draw("robot", 2, "libero_10-03", 1) != draw("robot", 2, "libero_10-03", 0)
    camera = draw("camera", 3, "libero_10-03").parameters
    assert abs(camera["azimuth_deg"]) == table()["camera"][3]["azimuth_deg"]
    assert abs(camera["distance_factor"] - 1) == pytest.approx(table()["camera"][3]["distance"])


def test_every_kind_grows_with_its_level() -> None:
    for case in ("libero_10-00", "libero_goal-07-s3"):
        offsets = [np.abs(draw("robot", v, case).parameters["joint_offsets_rad"]).max()
                   for v in LEVELS]
        assert offsets == pytest.approx([table()["robot"][v]["offset_rad"] for v in LEVELS])
        lights = [abs(draw("light", v, case).parameters["intensity_factor"] - 1) for v in LEVELS]
        assert lights == sorted(lights) and lights[0] < lights[-1]
    image = np.random.default_rng(0).integers(60, 200, (64, 64, 3), dtype=np.uint8)
    change = []
    for level in (1, 4):
        noise = draw("noise", level, "libero_10-00")
        out = corrupt(image, noise, noise_generator(noise, 0))
        assert out.dtype == np.uint8 and out.shape == image.shape and out.flags.c_contiguous
        change.append(float(np.abs(out.astype(int) - image.astype(int)).mean()))
    assert change[0] < change[1]


def test_noise_is_drawn_per_policy_call_and_repeats_exactly() -> None:
    noise = draw("noise", 2, "libero_10-00")
    image = np.full((32, 32, 3), 128, dtype=np.uint8)
    first = corrupt(image, noise, noise_generator(noise, 0))
    assert np.array_equal(first, corrupt(image, noise, noise_generator(noise, 0)))
    assert not np.array_equal(first, corrupt(image, noise, noise_generator(noise, 1)))


def test_perturbed_cases_sit_beside_their_twins_with_their_own_identity() -> None:
    catalog = load_catalog()
    cases = select(catalog, SelectionRequest(scope="development", task_ids=(0, 1),
                                             perturbations=(("camera", 2), ("noise", 1))))
    assert [c.case_id for c in cases] == [
        "libero_10-00", "libero_10-00~camera2", "libero_10-00~noise1",
        "libero_10-01", "libero_10-01~camera2", "libero_10-01~noise1"]
    perturbed = cases[1]
    assert str(perturbed.twin) == "libero_10-00" and perturbed.family == "libero"
    plan = make_plan(load_profile("zero"), SelectionRequest(
        scope="development", task_ids=(0,), perturbations=(("camera", 2),)),
        adapter="libero", render="consumed", video_stride=1)
    assert plan.entries == (cases[0], perturbed)
    data = perturbed.as_dict(plan.variant_identity(perturbed))
    assert data["perturbation"] == {"kind": "camera", "level": 2} and data["twin"] == "libero_10-00"
    assert "kind" not in data and "level" not in data  # record schema 2: one place for them
    assert data["identity"] == perturb_identity("fast") == plan.perturb_identity
    assert plan.variant_identity(cases[0]) is None
    assert data["language"] == cases[0].language  # the policy gets the entry's instruction
    assert Entry.from_dict(data) == perturbed
    schema_1 = {**data, "kind": "camera", "level": 2}  # schema 1 repeated them at the top
    assert Entry.from_dict(schema_1) == perturbed
    assert perturb_identity("fast").startswith("libero-perturb-v1:")
    assert perturb_identity("fast") not in (protocol_identity("fast"), ood_identity("fast"))
    full = select(catalog, SelectionRequest(scope="development", task_ids=(0,), mode="full",
                                            init_states=(17,), perturbations=(("light", 1),)))
    assert [c.case_id for c in full] == ["libero_10-00-s17", "libero_10-00-s17~light1"]
    assert str(full[1].twin) == "libero_10-00-s17"
    with pytest.raises(SetupError, match="LIBERO-PRO entry is a perturbation already"):
        select(catalog, SelectionRequest(scope="ood", suite="libero_goal_task", task_ids=(0,),
                                         perturbations=(("camera", 1),)))


def _perturbed(case: str, outcome: str, schema: int) -> dict[str, object]:
    """A perturbed case's record as record schema 1 or 2 writes it."""
    case_id = CaseId.parse(case)
    assert case_id.variant is not None and case_id.variant.level is not None
    kind, level = case_id.variant.kind, case_id.variant.level
    record = synthetic_record(case, outcome)
    record["entry"].update(family="libero", perturbation={"kind": kind, "level": level},
                           twin=str(case_id.base))
    if schema == 1:  # it repeated the perturbation's kind and level at the top
        record["entry"].update(kind=kind, level=level)
    return dict(record)


@pytest.mark.parametrize("schema", [1, 2])
def test_perturbed_cases_are_paired_and_kept_out_of_their_twins_suite_rate(schema: int) -> None:
    records = {r["case"]: r for r in (
        synthetic_record("libero_10-00", "success"), synthetic_record("libero_10-01", "success"),
        _perturbed("libero_10-00~camera1", "success", schema),
        _perturbed("libero_10-01~camera1", "failure", schema),
        _perturbed("libero_10-00~camera4", "failure", schema),
        _perturbed("libero_10-01~camera4", "failure", schema),
    )}
    summary = summarize(list(records), records)  # type: ignore[arg-type]
    assert summary["suites"]["libero_10"]["completed"] == 2  # the twins alone
    assert summary["suites"]["libero_10~camera4"]["successes"] == 0
    levels = summary["robustness"]["levels"]["camera"]
    assert levels["1"]["paired"]["drop_points"] == 50.0
    assert levels["4"]["paired"]["drop_points"] == 100.0
    tree = case_tree(records["libero_10-00~camera4"])
    assert (tree.parent_suite, tree.suite, tree.sub_suite) == ("Perturbations", "camera",
                                                               "level 4 / libero_10")
