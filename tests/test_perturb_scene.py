"""The position and environment kinds without the simulator: their draws, which task
objects move, the collection-time skip, the texture swap and state layout, and the
robustness rows that keep them apart from LIBERO-PRO's kinds of the same name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from synthetic import synthetic_record

from pytest_libero.catalog.entries import load_catalog
from pytest_libero.catalog.inventory import installed_files
from pytest_libero.config.plan import why_not_applicable
from pytest_libero.perturb.draw import draw
from pytest_libero.perturb.environment import keeps_out, map_state, retexture, upright
from pytest_libero.perturb.levels import LEVELS, TABLE, parse_perturbations, perturb_identity
from pytest_libero.perturb.position import offsets
from pytest_libero.perturb.tasks import position_subjects_of
from pytest_libero.results.summary import summarize

OBJECTS = {"objects": ["plate_1", "akita_black_bowl_1"]}
CONTEXT = {"candidates": [f"thing_{i}" for i in range(10)],
           "textures": [f"t{i}.png" for i in range(8)]}


def entry(case: str):  # type: ignore[no-untyped-def]
    [found] = [e for e in load_catalog().entries if e.case_id == case]
    return found


def test_all_holds_the_new_kinds_and_the_table_is_in_the_identity() -> None:
    asked = parse_perturbations("all")
    assert ("position", 4) in asked and ("environment", 1) in asked
    assert parse_perturbations("environment:2,position:1") == (("position", 1), ("environment", 2))
    assert perturb_identity("fast").startswith("libero-perturb-v1:")


def test_position_draws_one_direction_per_object_and_grows_with_the_level() -> None:
    first = draw("position", 2, "libero_10-03", 0, OBJECTS)
    assert first == draw("position", 2, "libero_10-03", 0, OBJECTS)  # a function of its inputs
    assert first != draw("position", 2, "libero_10-03", 1, OBJECTS)  # the next attempt differs
    assert sorted(first.parameters["direction_deg"]) == sorted(OBJECTS["objects"])
    sizes = []
    for level in LEVELS:
        shift = offsets(draw("position", level, "libero_10-03", 0, OBJECTS))
        lengths = [float(np.hypot(*v)) for v in shift.values()]
        assert lengths == pytest.approx([TABLE["position"][level]["offset_m"]] * 2, abs=1e-5)
        sizes.append(lengths[0])
    assert sizes == sorted(sizes) and sizes[0] < sizes[-1]


def test_environment_draws_more_distractors_per_level_and_textures_from_level_2() -> None:
    counts, textured = [], []
    for level in LEVELS:
        drawn = draw("environment", level, "libero_10-03", 0, CONTEXT).parameters
        counts.append(len(drawn["distractors"]))
        textured.append(bool(drawn["textures"]))
        assert len(set(drawn["distractors"])) == len(drawn["distractors"])
        assert set(drawn["distractors"]) <= set(CONTEXT["candidates"])
        assert len(drawn["spots"]) == len(drawn["distractors"])
    assert counts == [1, 2, 3, 4] and textured == [False, True, True, True]
    one, two = (draw("environment", 3, "libero_10-03", a, CONTEXT).parameters for a in (0, 1))
    # The scene is built once: objects and textures hold across attempts, spots are redrawn.
    assert (one["distractors"], one["textures"]) == (two["distractors"], two["textures"])
    assert one["spots"] != two["spots"]


def test_position_moves_task_objects_on_the_table_and_keeps_the_rest() -> None:
    bowl = entry("libero_10-03")
    bddl, _ = installed_files(bowl.bddl_file, bowl.init_states_file)
    moved, kept = position_subjects_of(bddl)
    assert moved == ("akita_black_bowl_1",) and kept == {"white_cabinet_1": "a fixture"}
    assert why_not_applicable(bowl.perturbed("position", 1)) is None
    drawer = entry("libero_goal-00")  # "open the middle drawer": nothing to move
    reason = why_not_applicable(drawer.perturbed("position", 2))
    assert reason is not None and reason.startswith("libero_goal-00~position2: position cannot apply")
    assert why_not_applicable(drawer.perturbed("environment", 2)) is None
    assert why_not_applicable(drawer) is None


def test_textures_are_swapped_by_name_and_the_state_is_laid_out_by_joint() -> None:
    xml = ('<asset><texture file="/a/floor.png" type="2d" name="texplane" />'
           '<texture file="/a/wood.png" type="cube" name="tex-table" />'
           '<texture file="/a/bowl.png" name="bowl_tex" /></asset>')
    out, replaced = retexture(xml, {"floor": "new.png", "table": "oak.png"}, Path("/t"))
    assert 'file="/t/new.png" type="2d" name="texplane"' in out and 'file="/a/bowl.png"' in out
    assert replaced["tex-table"] == {"part": "table", "from": "wood.png", "to": "oak.png"}
    old = {"hinge": (0, 1, 0, 1), "box": (1, 7, 1, 6)}
    new = {"hinge": (0, 1, 0, 1), "box": (1, 7, 1, 6), "added": (8, 7, 7, 6)}
    state = np.arange(1 + 8 + 7, dtype=np.float64)
    template = np.full(1 + 15 + 13, -1.0)
    mapped = map_state(state, old, 8, new, template, 15)
    assert np.array_equal(mapped[:9], state[:9])  # time and the native joints' qpos
    assert np.array_equal(mapped[16:23], state[9:16])  # their qvel
    assert np.all(mapped[9:16] == -1.0)  # the added object's pose is the template's
    quat = upright((np.pi / 2, np.pi / 2), "x", 90.0)  # a yaw, as LIBERO's init states hold
    assert quat is not None and quat == pytest.approx([np.cos(np.pi / 4), 0, 0, np.sin(np.pi / 4)])
    assert upright({"x": (1, 1)}, None, 0.0) is None


def test_generated_and_libero_pro_kinds_of_one_name_are_never_pooled() -> None:
    twin = synthetic_record("libero_goal-00", "success")
    twin["entry"].update(family="libero", language_source="task_name")
    shipped = synthetic_record("libero_goal_swap-00", "failure")
    shipped["entry"].update(family="libero_pro", kind="position", level=1,
                            twin="libero_goal-00", language_source="twin")
    generated = synthetic_record("libero_goal-00~position1", "success")
    generated["entry"].update(family="libero", perturbation={"kind": "position", "level": 1},
                              twin="libero_goal-00")
    records = {r["case"]: r for r in (twin, shipped, generated)}
    block = summarize(list(records), records)["robustness"]  # type: ignore[arg-type]
    assert list(block["kinds"]) == ["position", "generated:position"]
    assert block["kinds"]["position"]["source"] == "libero-pro"
    assert block["kinds"]["position"]["successes"] == 0
    assert block["kinds"]["generated:position"]["source"] == "generated"
    assert block["kinds"]["generated:position"]["successes"] == 1
    assert set(block["levels"]) == {"position", "generated:position"}


def test_a_distractor_keeps_the_margin_from_every_goal_region() -> None:
    """The footprint (reach around the spot) plus the margin must not meet a region's box,
    on any side; far away, or with no region, any spot serves."""
    region = (0.0, 0.0, 0.1, 0.1)
    assert keeps_out(0.3, 0.05, 0.05, 0.04, [region])
    assert not keeps_out(0.18, 0.05, 0.05, 0.04, [region])   # 0.08 from the edge: 0.09 needed
    assert not keeps_out(0.05, -0.08, 0.05, 0.04, [region])  # below it
    assert not keeps_out(0.05, 0.05, 0.0, 0.0, [region])     # inside it
    assert keeps_out(0.05, 0.05, 0.05, 0.04, [])
    assert not keeps_out(0.3, 0.05, 0.05, 0.04, [region, (0.25, 0.0, 0.35, 0.1)])
