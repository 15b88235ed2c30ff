"""Round 3, classes 6 and 9: a perturbation that was not applied never counts and never
verifies, and an installed instruction table edited after installation is never obeyed.

No simulator: a blind adapter of this file's own (the extension point of
``--libero-adapter``) stands in for one that ignores or fakes the perturbation, and the
damaged table lives in a copy of the package."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from harness.hostile import Hostile
from harness.runs import run_folder, run_records
from pytest_libero.perturb.kinds.semantic import SHIPPED_SHA256, table_sha256
from pytest_libero.results.robustness import robustness_summary

pytest_plugins = ["pytester"]

ROOT = Path(__file__).resolve().parents[1]
THIS = "tests/test_hostile_perturbations.py"
BLIND = '''
import numpy as np
from pytest_libero.policy.contract import Observation


class Blind:
    """Opens an episode that shows a grey scene and never succeeds; ``applies``: whether
    it records the case's perturbation the way the libero adapter does."""

    applies = False

    def open(self, entry, *, track, control_cap, render, video_stride):
        return BlindEpisode(entry, self.applies)


class Applies(Blind):
    applies = True


class BlindEpisode:
    init_controls = 0

    def __init__(self, entry, applies):
        self.entry = entry
        self.identity = {"seed": 0}
        if applies and entry.perturbation is not None:
            self.identity["perturbation"] = {"kind": entry.perturbation.kind,
                                             "level": entry.perturbation.level}

    def observe(self, policy_calls, executed_controls):
        grey = np.full((256, 256, 3), 128, dtype=np.uint8)
        return Observation(self.entry.language, {"agentview": grey, "robot0_eye_in_hand": grey},
                           None, policy_calls, executed_controls)

    def step(self, action, observe_next=True):
        return False

    def frame(self):
        return np.full((256, 256, 3), 128, dtype=np.uint8)

    def renders(self):
        return None

    def close(self):
        pass
'''
TINY = ["--libero-profile=zero", "--libero-scope=task_coverage", "--libero-suite=libero_10",
        "--libero-task-ids=0", "--libero-budget-mode=decisions", "--libero-max-policy-calls=1",
        "--libero-replan-interval=1", "--libero-isolation=none"]


def blind_run(pytester: pytest.Pytester, adapter: str) -> dict[str, dict[str, Any]]:
    pytester.makepyfile(blind_adapters=BLIND)
    pytester.syspathinsert()
    pytester.runpytest(*TINY, f"--libero-adapter=blind_adapters:{adapter}",
                       "--libero-perturb=camera:4")
    return {r["case"]: r for r in run_records(run_folder(pytester.path / "libero-results"))}


def test_an_adapter_that_ignores_the_perturbation_errors_the_case_before_its_episode(
    pytester: pytest.Pytester,
) -> None:
    found = blind_run(pytester, "Blind")
    twin, perturbed = found["libero_10-00"], found["libero_10-00~camera4"]
    assert twin["outcome"] == "failure"
    assert perturbed["outcome"] == "errored" and perturbed["counters"]["policy_calls"] == 0
    error = perturbed["error"]
    assert (error["kind"], error["cause"]) == ("environment", "perturbation_not_applied")
    assert error["message"].startswith("libero_10-00~camera4 is a camera level 4 case, but "
                                       "nothing records the perturbation applied")
    assert "blind_adapters:Blind" in error["message"]
    block = robustness_summary(found)
    assert block is not None and block["kinds"]["camera"]["paired"]["pairs"] == 0


def forged(record: dict[str, Any], edit: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    copy = json.loads(json.dumps(record))
    edit(copy)
    return copy


FORGERIES: dict[str, Callable[[dict[str, Any]], None]] = {
    "block-removed": lambda r: r.pop("perturbation"),
    "another-kind": lambda r: r["perturbation"].update(kind="light"),
    "another-level": lambda r: r["perturbation"].update(level=1),
}


@pytest.fixture(scope="module")
def applied_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A finished run whose perturbed case recorded its perturbation (a subprocess, so
    the module's pytester runs stay apart)."""
    work = tmp_path_factory.mktemp("applied")
    (work / "blind_adapters.py").write_text(BLIND)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(work), str(ROOT)])}
    subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *TINY,
                    "--libero-adapter=blind_adapters:Applies", "--libero-perturb=camera:4"],
                   cwd=work, env=env, capture_output=True, timeout=300, check=False)
    return run_folder(work / "libero-results")


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_a_record_that_does_not_prove_its_perturbation_is_never_counted(
    applied_run: Path, forgery: str,
) -> None:
    found = {r["case"]: r for r in run_records(applied_run)}
    case = "libero_10-00~camera4"
    honest = robustness_summary(found)
    assert honest is not None and honest["kinds"]["camera"]["paired"]["pairs"] == 1
    found[case] = forged(found[case], FORGERIES[forgery])
    block = robustness_summary(found)
    assert block is not None
    camera = block["kinds"]["camera"]
    assert (camera["paired"]["pairs"], camera["completed"], camera["unproven"]) == (0, 0, 1)


@pytest.mark.parametrize("forgery", sorted(FORGERIES))
def test_a_record_that_does_not_prove_its_perturbation_never_verifies(
    applied_run: Path, tmp_path: Path, forgery: str,
) -> None:
    run_dir = tmp_path / "run"
    shutil.copytree(applied_run, run_dir)
    case = "libero_10-00~camera4"
    lines = [json.loads(line) for line in (run_dir / "results.jsonl").read_text().splitlines()]
    lines = [forged(r, FORGERIES[forgery]) if r["case"] == case else r for r in lines]
    (run_dir / "results.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    episode = run_dir / "cases" / case / "episode.json"
    episode.write_text(json.dumps(forged(json.loads(episode.read_text()), FORGERIES[forgery])))
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(applied_run.parents[2]), str(ROOT)])}
    done = subprocess.run([sys.executable, "-m", "pytest_libero.cli", "verify", str(run_dir),
                           "--case", case, "--libero-adapter=blind_adapters:Applies"], env=env,
                          capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode != 0
    assert f"{case} NOT VERIFIABLE: {case} is a camera level 4 case, but " in done.stdout, done.stdout
    assert "a perturbed case verifies only with the perturbation it ran under recorded" in done.stdout


def damaged_copy(root: Path, rewrite: Callable[[dict[str, Any]], None]) -> Path:
    """A copy of the package whose instruction table was edited after installation."""
    copy = root / "site"
    shutil.copytree(ROOT / "pytest_libero", copy / "pytest_libero",
                    ignore=shutil.ignore_patterns("__pycache__"))
    path = copy / "pytest_libero" / "data" / "libero_instructions.json"
    table = json.loads(path.read_text())
    rewrite(table)
    path.write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    return copy


REWRITES: dict[str, Callable[[dict[str, Any]], None]] = {
    "telling-rewrite": lambda t: t["entries"]["libero_10-00"].update(
        {"1": "libero_10 level 1 semantic perturbation"}),
    "empty-rewrite": lambda t: t["entries"]["libero_10-00"].update({"1": ""}),
}


@pytest.mark.parametrize("rewrite", sorted(REWRITES))
@pytest.mark.parametrize("perturb", ["semantic:1", "camera:1"])
def test_an_edited_instruction_table_is_refused_before_any_case(
    tmp_path: Path, rewrite: str, perturb: str,
) -> None:
    site = damaged_copy(tmp_path, REWRITES[rewrite])
    env = {**os.environ, "PYTHONPATH": str(site)}
    done = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider",
                           "--libero-profile=zero", "--libero-scope=task_coverage",
                           "--libero-suite=libero_10", "--libero-task-ids=0",
                           f"--libero-perturb={perturb}"],
                          cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300,
                          check=False)
    assert done.returncode == pytest.ExitCode.USAGE_ERROR, done.stdout + done.stderr
    assert ("libero_instructions.json in the installed pytest-libero is not the table this "
            "version shipped") in done.stderr
    assert "reinstall pytest-libero" in done.stderr and "Traceback" not in done.stderr
    assert not (tmp_path / "libero-results").exists()


def test_the_pin_is_the_shipped_table() -> None:
    assert table_sha256() == SHIPPED_SHA256


HOSTILE = [
    Hostile(6, "a `--libero-adapter` that ignores the case's perturbation (camera:4)",
            "the perturbed case is errored before its episode: `environment` / "
            "`perturbation_not_applied`, \"... is a camera level 4 case, but nothing records the "
            "perturbation applied: the adapter ... must apply it\"; it is never paired",
            f"{THIS}::test_an_adapter_that_ignores_the_perturbation_errors_the_case_before_its_episode"),
    Hostile(6, "a finished record whose `perturbation` block was removed, or names another kind "
            "or level", "the robustness rows leave it out (`unproven`: 1, no pair)",
            f"{THIS}::test_a_record_that_does_not_prove_its_perturbation_is_never_counted"),
    Hostile(6, "the same forged record, verified", "NOT VERIFIABLE: \"a perturbed case verifies "
            "only with the perturbation it ran under recorded\"",
            f"{THIS}::test_a_record_that_does_not_prove_its_perturbation_never_verifies"),
    Hostile(9, "an installed instruction table edited to say \"libero_10 level 1 semantic "
            "perturbation\", or an empty rewrite (well formed, so no other check refuses it)",
            "a usage error before any case (exit 4): \"libero_instructions.json in the installed "
            "pytest-libero is not the table this version shipped ... reinstall pytest-libero\"; "
            "the table's sha256 is pinned in the code",
            f"{THIS}::test_an_edited_instruction_table_is_refused_before_any_case"),
]
