"""The OOD catalog (LIBERO-PRO suites on disk): entries, twins, the language rule, the
selection and its refusals, identities. No simulator is built here: the files are read."""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path

import pytest

from pytest_libero.catalog.entries import OOD_KINDS, Entry, OodSource, load_catalog
from pytest_libero.catalog.inventory import installed_files, load_inventory, verify_entries
from pytest_libero.catalog.selection import SelectionRequest, parse_ood_kinds, select
from pytest_libero.config.plan import make_plan
from pytest_libero.config.profiles import load_profile
from pytest_libero.data import OOD_CATALOG_FILE, data_path
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.identity import ood_identity, protocol_identity

pytest_plugins = ["pytester"]


def _bddl_language(bddl_file: str, init_states_file: str) -> str:
    bddl, _ = installed_files(bddl_file, init_states_file)
    match = re.search(r"\(:language\s+([^)]*)\)", bddl.read_text(encoding="utf-8"))
    assert match, bddl
    return match.group(1).strip()


def test_every_ready_entry_has_a_native_twin_kind_and_level() -> None:
    catalog = load_catalog()
    assert len(catalog.entries) == 130  # the native catalog is untouched
    assert catalog.ood_entries, "no OOD entry is ready"
    kinds = Counter(e.variant.kind for e in catalog.ood_entries)
    assert set(kinds) == set(OOD_KINDS), kinds
    for entry in catalog.ood_entries:
        assert entry.family == "libero_pro" and entry.is_ood
        twin = catalog.twin_of(entry)
        assert twin.family == "libero" and not twin.is_ood
        assert entry.suite.startswith(twin.suite + "_")
        assert catalog.horizon(entry.suite)[0] == catalog.horizon(twin.suite)[0]
        assert isinstance(entry.variant, OodSource) and 1 <= entry.variant.level <= 5
    sweep = sorted({(e.suite, e.variant.level) for e in catalog.ood_entries if "_temp_" in e.suite})
    assert [level for _, level in sweep] == [1, 2, 3, 4, 5] * 2  # x and y, five steps each


def test_the_instruction_is_the_bddls_where_it_changes_and_the_twins_where_it_does_not() -> None:
    catalog = load_catalog()
    for entry in catalog.ood_entries:
        twin = catalog.twin_of(entry)
        own = _bddl_language(entry.bddl_file, entry.init_states_file)
        base = _bddl_language(twin.bddl_file, twin.init_states_file)
        if entry.variant.kind == "semantic":  # the instruction is the perturbation
            assert own != base, entry
            assert (entry.language_source, entry.language) == ("bddl", own), entry
        else:  # the scene is: the pair shares the twin's instruction
            assert (entry.language_source, entry.language) == ("twin", twin.language), entry
            if entry.variant.kind in ("object", "position"):
                assert own == base, entry
    task0 = catalog.suite_entries("libero_goal_task")[0]
    assert task0.language == "open the bottom drawer of the cabinet"  # not the file name's
    assert task0.name == "open_the_middle_drawer_of_the_cabinet"
    semantic = {e.suite.rsplit("_", 1)[1] for e in catalog.ood_entries if e.language_source == "bddl"}
    assert semantic == {"lan", "task"}


def test_records_carry_family_kind_level_twin_and_language_source() -> None:
    catalog = load_catalog()
    entry = catalog.suite_entries("libero_goal_lan")[0]
    plan = make_plan(load_profile("zero"), SelectionRequest(scope="ood", suite="libero_goal_lan",
                                                           task_ids=(0,)),
                     adapter="libero", render="consumed", video_stride=1)
    companion = catalog.paraphrase_of(entry)  # the paraphrase in the twin's own scene
    assert plan.entries == (catalog.twin_of(entry), entry, companion)
    assert companion.case_id == "libero_goal-00~paraphrase" and companion.language == entry.language
    assert (companion.bddl_file, companion.init_states_file) == (
        catalog.twin_of(entry).bddl_file, catalog.twin_of(entry).init_states_file)
    assert Entry.from_dict(companion.as_dict()) == companion
    assert plan.variant_identity(companion) == ood_identity("fast")
    assert plan.variant_identity(plan.entries[0]) is None  # the native twin keeps its own
    data = entry.as_dict(plan.variant_identity(entry))
    assert data["family"] == "libero_pro" and data["kind"] == "semantic" and data["level"] == 1
    assert data["twin"] == "libero_goal-00" and data["language_source"] == "bddl"
    assert data["identity"] == ood_identity("fast") == plan.ood_identity
    assert "perturbation" not in data
    assert Entry.from_dict(data) == entry
    assert Entry.from_dict(entry.at_state(7).as_dict()) == entry.at_state(7)
    assert str(entry.at_state(7).twin) == "libero_goal-00-s7"
    native = catalog.entries[0].as_dict()
    assert native["family"] == "libero" and native["language_source"] == "task_name"
    assert "twin" not in native and "kind" not in native


def test_ood_identity_is_its_own_and_hashes_the_ood_catalog() -> None:
    assert ood_identity("fast").startswith("libero-ood-v1:")
    assert ood_identity("full").startswith("libero-ood-full-v1:")
    assert ood_identity("fast") not in (protocol_identity("fast"), ood_identity("full"))
    document = json.loads(data_path(OOD_CATALOG_FILE).read_bytes())
    assert document["schema"] == "pytest-libero/ood-catalog/1"


def test_not_ready_suites_are_refused_by_name_with_their_reason() -> None:
    catalog = load_catalog()
    assert "libero_goal_env" in catalog.not_ready and "libero_goal_env" not in catalog.ood_suites
    for suite in ("libero_10_with_red_box", "libero_goal_env", "libero_spatial_with_milk"):
        with pytest.raises(SetupError) as caught:
            select(catalog, SelectionRequest(scope="task_coverage", suite=suite, task_ids=(0,)))
        message = str(caught.value)
        assert suite in message and catalog.not_ready[suite] in message
    assert "missing asset" in catalog.not_ready["libero_10_with_red_box"]
    assert "10 states" in catalog.not_ready["libero_spatial_with_milk"]
    with pytest.raises(SetupError, match="not a LIBERO suite"):
        select(catalog, SelectionRequest(scope="task_coverage", suite="libero_goal_nothing",
                                         task_ids=(0,)))


def test_scope_ood_selects_every_ready_entry_and_each_twin_once() -> None:
    catalog = load_catalog()
    cases = select(catalog, SelectionRequest(scope="ood"))
    ids = [e.case_id for e in cases]
    assert len(ids) == len(set(ids))
    ood = {e.case_id for e in catalog.ood_entries}
    twins = {catalog.twin_of(e).case_id for e in catalog.ood_entries}
    companions = {f"{catalog.twin_of(e).case_id}~paraphrase" for e in catalog.ood_entries
                  if e.suite.endswith("_lan")}
    assert len(companions) == 40
    assert set(ids) == ood | twins | companions
    assert len(ids) == len(ood) + len(twins) + len(companions)
    lan = ids.index("libero_10_lan-03")
    assert ids[lan + 1] == "libero_10-03~paraphrase"  # each beside its _lan case
    native = [e for e in cases if not e.is_ood]
    assert native == [e for e in catalog.entries if e.case_id in twins]  # native order, first


def test_ood_kind_narrows_and_bad_kinds_are_refused() -> None:
    catalog = load_catalog()
    cases = select(catalog, SelectionRequest(scope="ood", ood_kinds=parse_ood_kinds("semantic")))
    assert {e.variant.kind for e in cases if e.is_ood} == {"semantic", "paraphrase"}
    bases = ("libero_spatial", "libero_object", "libero_goal", "libero_10")
    assert {e.suite for e in cases if e.is_ood} == {f"{b}_{s}" for b in bases
                                                   for s in ("lan", "task")} | set(bases)
    with pytest.raises(SetupError, match="unknown kind.*colour"):
        parse_ood_kinds("object,colour")
    with pytest.raises(SetupError, match="--libero-scope=ood"):
        select(catalog, SelectionRequest(scope="smoke", ood_kinds=("object",)))
    with pytest.raises(SetupError, match="not 'libero_goal'"):
        select(catalog, SelectionRequest(scope="ood", suite="libero_goal"))


def test_full_mode_is_refused_for_unvalidated_ood_suites() -> None:
    with pytest.raises(SetupError, match="full mode is refused for libero_goal_task"):
        select(load_catalog(), SelectionRequest(scope="task_coverage", suite="libero_goal_task",
                                                task_ids=(0,), mode="full"))


def test_installed_ood_files_match_the_ood_inventory() -> None:
    catalog = load_catalog()
    verify_entries([e.as_dict() for e in catalog.ood_entries], load_inventory(ood=True))


def test_collect_only_of_scope_ood_lists_each_case_once(pytester: pytest.Pytester) -> None:
    result = pytester.runpytest("--libero-profile=zero", "--libero-scope=ood", "--collect-only", "-q")
    collected = [line.split("[", 1)[1].rstrip("]") for line in result.outlines
                 if "test_libero_task[" in line]
    catalog = load_catalog()
    expected = [e.case_id for e in select(catalog, SelectionRequest(scope="ood"))]
    assert collected == expected
    assert len(collected) == len(set(collected)) == len(catalog.ood_entries) + len(
        {catalog.twin_of(e) for e in catalog.ood_entries}) + 40  # the paraphrase companions


def test_a_baseline_with_another_ood_catalog_is_refused(tmp_path: Path) -> None:
    from pytest_libero.results.gate import load_baseline

    (tmp_path / "run.json").write_text(json.dumps({
        "protocol_identity": protocol_identity("fast"), "ood_identity": "libero-ood-v1:" + "0" * 32}))
    (tmp_path / "results.jsonl").write_text("")
    with pytest.raises(SetupError, match="libero-ood-v1:0000"):
        load_baseline(tmp_path, protocol_identity("fast"),
                      extra={"ood_identity": ood_identity("fast")})
    # Without OOD cases its identity is not compared: what stops it is its empty results.
    with pytest.raises(SetupError, match="holds no whole record"):
        load_baseline(tmp_path, protocol_identity("fast"))
