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
from pytest_libero.perturb.kinds.environment import draw_basis, room_table
from pytest_libero.perturb.kinds.position import offsets
from pytest_libero.perturb.levels import LEVELS, parse_perturbations, perturb_identity, table
from pytest_libero.perturb.registry import draw
from pytest_libero.perturb.settling import SCENE_REDRAWS
from pytest_libero.perturb.tabletop import (
    keeps_out,
    map_state,
    retexture,
    texture_files,
    upright,
)
from pytest_libero.perturb.tasks import position_subjects_of
from pytest_libero.protocol.errors import SetupError
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
        assert lengths == pytest.approx([table()["position"][level]["offset_m"]] * 2, abs=1e-5)
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


def test_the_room_table_covers_every_native_task_under_todays_draws() -> None:
    """The frozen environment-room table was measured for all 130 tasks at every level
    under the draws this checkout makes; each refusal is the adapter's own reason."""
    table = room_table()
    assert table["draw_basis"] == draw_basis()
    assert table["checked"] == sorted(e.task_id for e in load_catalog().entries)
    assert table["levels"] == list(LEVELS)
    for case, reason in table["no_room"].items():
        task, _, kind = case.partition("~")
        assert kind in {f"environment{level}" for level in LEVELS} and task in table["checked"]
        assert reason.startswith(f"{case}: every one of {SCENE_REDRAWS + 1} draws was rejected")


def test_an_environment_case_with_no_room_is_skipped_in_either_mode() -> None:
    """libero_goal-05 (the plate to the front of the stove) takes one distractor, not two
    (measured); its full-mode cases ask the same row."""
    plate = entry("libero_goal-05")
    assert why_not_applicable(plate.perturbed("environment", 1)) is None
    for case in (plate, plate.at_state(7)):
        reason = why_not_applicable(case.perturbed("environment", 2))
        assert reason is not None, case
        assert reason.startswith(f"{case.case_id}~environment2: environment cannot apply at level 2"
                                 ": the table has no room (libero_goal-05~environment2: every one")
        assert "build_environment_room.py" in reason


def test_a_room_table_measured_under_other_draws_is_refused(monkeypatch: pytest.MonkeyPatch) -> None:
    import pytest_libero.perturb.kinds.environment as room

    room_table.cache_clear()
    monkeypatch.setattr(room, "draw_basis", lambda: {**draw_basis(), "scene_redraws": 99})
    try:
        with pytest.raises(SetupError, match="measured under other environment draws.*rebuild it"):
            room.no_room("libero_goal-05", 2)
    finally:
        room_table.cache_clear()


def test_only_square_textures_are_drawn(tmp_path: Path) -> None:
    """A cube texture (LIBERO's tables) compiles from a square image only: the installed
    509x339 ``table_light_wood.png`` failed libero_spatial-05 at environment level 4."""
    from PIL import Image

    for name, size in (("square.png", (8, 8)), ("wide.png", (9, 6)), ("tall.png", (4, 6))):
        Image.new("RGB", size).save(tmp_path / name)
    (tmp_path / "notes.txt").write_text("not an image")
    assert texture_files(tmp_path) == ["square.png"]


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


def test_a_floor_plane_is_the_support_only_where_no_table_is_below() -> None:
    """robosuite's floor is a collision plane in group 1, which the group-0 ray misses:
    libero_object's objects stand on it. The plane answers only where nothing in group 0
    lies below, and the table's height never comes from it while a table is beside the
    objects."""
    from types import SimpleNamespace

    from pytest_libero.perturb.tabletop import _ray_down, floor_planes, support_height

    table_top = {(0.0, 0.0)}  # where a group-0 table geom lies below, at 0.9 m

    def mj_ray(model, data, start, direction, group, flg, exclude, geomid):  # type: ignore[no-untyped-def]
        hit = (round(float(start[0]), 2), round(float(start[1]), 2)) in {
            (x + dx, y + dy) for x, y in table_top for dx, dy in ((0.08, 0), (-0.08, 0), (0, 0.08))}
        geomid[0] = 1 if hit else -1
        return 2.0 - 0.9 if hit else -1.0

    model = SimpleNamespace(_model=None, ngeom=2, geom_type=np.array([0, 6]),
                            geom_contype=np.array([1, 1]), geom_conaffinity=np.array([1, 1]))
    sim = SimpleNamespace(model=model, data=SimpleNamespace(
        _data=None, geom_xpos=np.array([[0.0, 0.0, 0.0], [0.0, 0.0, 0.9]])))
    mujoco = SimpleNamespace(mj_ray=mj_ray)
    owner = ["support", "support"]
    planes = floor_planes(sim)
    assert planes == [(0.0, 0)]  # the plane only, not the table's box
    assert _ray_down(mujoco, sim, 0.08, 0.0, planes=planes) == (1, pytest.approx(0.9))
    assert _ray_down(mujoco, sim, 0.5, 0.5, planes=planes) == (0, 0.0)  # off the table: the floor
    assert _ray_down(mujoco, sim, 0.5, 0.5)[0] == -1
    # Three of four rays meet the table, one the floor: the table's height.
    assert support_height(mujoco, sim, owner, [(0.0, 0.0)]) == pytest.approx(0.9)
    table_top.clear()  # libero_object: no table at all
    assert support_height(mujoco, sim, owner, [(0.0, 0.0)]) == 0.0
