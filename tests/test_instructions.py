"""The semantic kind's frozen instruction table: rebuilt byte for byte from the installed
catalog, and every rewrite keeps to its rules (no simulator)."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

from pytest_libero.catalog.entries import load_catalog
from pytest_libero.catalog.selection import SelectionRequest, select
from pytest_libero.data import INSTRUCTIONS_FILE, data_path
from pytest_libero.perturb.kinds.semantic import instruction_table, rewritten, table_sha256
from pytest_libero.perturb.levels import level_table, perturb_identity
from pytest_libero.perturb.registry import draw, worded

ROOT = Path(__file__).resolve().parent.parent
KEPT_FROM_THE_POLICY = ("libero", "suite", "level", "perturb", "semantic", "twin", "seed",
                        "case", "benchmark", "spatial", "lan", "pro")
"""Words no rewrite may hold: what the protocol keeps from the policy."""


@pytest.fixture(scope="module")
def builder() -> ModuleType:
    spec = importlib.util.spec_from_file_location("build_instructions",
                                                  ROOT / "release" / "build_instructions.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["build_instructions"] = module
    spec.loader.exec_module(module)
    return module


def test_the_script_rebuilds_the_committed_table_byte_for_byte(builder: ModuleType) -> None:
    committed = data_path(INSTRUCTIONS_FILE).read_bytes()
    assert builder.render(builder.build()).encode() == committed
    assert builder.main(["--check"]) == 0


def test_every_native_entry_has_four_distinct_rewrites_that_name_nothing_kept() -> None:
    entries = instruction_table()["entries"]
    native = [e for e in load_catalog().entries]
    assert sorted(entries) == sorted(e.case_id for e in native) and len(entries) == 130
    for entry in native:
        row = entries[entry.case_id]
        assert row["task"] == entry.language
        said = [row[str(level)] for level in (1, 2, 3, 4)]
        assert len({entry.language, *said}) == 5, (entry.case_id, said)
        for text in said:
            words = set(re.findall(r"[a-z]+", text))
            assert not words & set(KEPT_FROM_THE_POLICY), (entry.case_id, text)
            assert not re.search(r"\d", text), (entry.case_id, text)


def test_level_one_changes_one_phrase_and_levels_grow(builder: ModuleType) -> None:
    row = instruction_table()["entries"]["libero_goal-07"]
    assert row["task"] == "turn on the stove" and row["1"] == "turn on the hob"
    for case, row in instruction_table()["entries"].items():
        pieces = [text for text, _ in builder.tokens(row["task"])]
        synonyms = builder.SYNONYMS | builder.NOUN_SYNONYMS
        one_swap = {" ".join([*pieces[:i], other, *pieces[i + 1:]])
                    for i, piece in enumerate(pieces) for other in synonyms.get(piece, ())}
        assert row["1"] in one_swap, (case, row["1"])  # one word or phrase replaced
        assert len(row["3"]) > len(builder.tokens(row["task"])) and any(
            mark in row["3"] for mark in ("not needed", "ignoring", "out of it", "never mind"))


def test_each_level_keeps_the_words_of_the_level_below(builder: ModuleType) -> None:
    """Level 2 keeps level 1's synonym, level 3 is level 2 with a clause after it, and
    level 4 is level 3 with task objects described: no level draws its words anew."""
    frames = [frame.removesuffix("{s}") for frame in builder.FRAMES]
    for case, row in instruction_table()["entries"].items():
        task, one, two, three, four = row["task"], row["1"], row["2"], row["3"], row["4"]
        frame = next(f for f in frames if two.startswith(f))
        changed = [w for w in one.split() if w not in task.split()]
        assert changed and all(w in two.split() for w in changed), (case, one, two)
        assert three.startswith(two) and len(three) > len(two), (case, two, three)
        descriptions = {w for d in builder.DESCRIPTIONS.values() for w in d.split()}
        assert four.startswith(frame) and four != three, (case, three, four)
        words = lambda text: set(re.findall(r"[a-z-]+", text))  # noqa: E731
        assert words(four) - words(three) <= descriptions, (case, three, four)


def test_descriptions_replace_only_a_task_object_that_is_alone_of_its_kind(builder: ModuleType) -> None:
    bddl = """(:fixtures
    main_table - table
  )
  (:objects
    akita_black_bowl_1 akita_black_bowl_2 - akita_black_bowl
    plate_1 - plate
    ketchup_1 - ketchup
  )
  (:obj_of_interest
    akita_black_bowl_1
    plate_1
  )"""
    text = builder.rewrite("x-00", "put the black bowl on the plate", bddl, 4)
    assert "flat round dish" in text and "black bowl" in text  # two bowls: named, not described
    assert "ketchup" in text  # the one object the task leaves alone, in level 3's clause
    one_bowl = bddl.replace(" akita_black_bowl_2", "")
    assert "deep black dish" in builder.rewrite("x-00", "put the black bowl on the plate", one_bowl, 4)
    assert builder.rewrite("x-00", "put the black bowl on the plate", bddl, 4) == text  # seeded
    assert builder.scene_of(bddl)[1] == {"akita_black_bowl_1", "plate_1"}
    with pytest.raises(ValueError, match="no word with a synonym"):
        builder.rewrite("x-00", "wave", bddl, 1)


def test_no_rewrite_hints_which_of_like_objects_is_meant(builder: ModuleType) -> None:
    """Two kinds with one description are never described (it would name either), and the
    clause never names an object of a sort the instruction names ("the yellow books"
    beside "the book in the middle" would say which book is meant)."""
    bddl = """(:fixtures
    main_table - table
  )
  (:objects
    black_book_1 - black_book
    yellow_book_1 yellow_book_2 - yellow_book
    plate_1 - plate
  )
  (:obj_of_interest
    black_book_1
    plate_1
  )"""
    for level in (3, 4):
        text = builder.rewrite("x-00", "pick up the book in the middle and put it on the plate",
                               bddl, level)
        assert "hardback volume" not in text and "yellow book" not in text, text
        assert text.count("book") == 1, text
    table = instruction_table()["entries"]
    assert "hardback volume" not in table["libero_90-86"]["4"]


def test_a_semantic_case_sends_its_line_and_hashes_the_table() -> None:
    [twin, case] = map(worded, select(load_catalog(), SelectionRequest(
        scope="development", task_ids=(3,), perturbations=(("semantic", 2),))))
    assert case.case_id == "libero_10-03~semantic2" and case.language_source == "rewrite"
    assert case.language == rewritten("libero_10-03", 2) != twin.language
    assert (case.bddl_file, case.init_states_file) == (twin.bddl_file, twin.init_states_file)
    drawn = draw("semantic", 2, "libero_10-03-s5").parameters
    assert drawn == {"instruction": case.language, "table_sha256": table_sha256()}
    assert level_table()["instructions_sha256"] == table_sha256()
    assert perturb_identity("fast").startswith("libero-perturb-v1:")
    assert json.loads(data_path(INSTRUCTIONS_FILE).read_bytes())["seed"] == level_table()["seed"]


def test_the_docs_print_libero_goal_as_the_table_has_it() -> None:
    text = (ROOT / "docs" / "perturbations.md").read_text()
    entries = instruction_table()["entries"]
    for index in range(10):
        row = entries[f"libero_goal-{index:02d}"]
        line = (f"| `libero_goal-{index:02d}` {row['task']} | "
                + " | ".join(row[str(level)] for level in (1, 2, 3, 4)) + " |")
        assert line in text, line
