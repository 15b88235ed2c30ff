"""What a user does after a plain install: the zero smoke for the wheel and the sdist
alike (:class:`InstalledArtifact`), every command for the wheel.

A test file subclasses :class:`InstalledProduct` and names its artifact; the class
installs it once (not editable, into a fresh venv of the tests' own Python) and runs,
each from an empty folder outside the checkout: the zero smoke, the demo (every case a
success at its recorded control, with its video and Allure labels), a perturbed
case, ``pytest-libero verify`` of that run, ``pytest-libero report`` of the demo's
Allure results and a script's ``evaluate`` of a policy object. The demo, the perturbed
run and the script trace every file the package opens (tests/open_trace.py): each must
be listed in the install's RECORD, none may come from the checkout, and the files each
run needs (the demo's recordings, the perturbations' tables, the catalog) must be among
them, so a trace that saw nothing fails.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from subprocess import CompletedProcess

import pytest
from allure_cli import allure3
from installs import ROOT, Artifacts, Installed, in_work, install, interpreter, traced

from harness.runs import run_folder, run_records
from pytest_libero.data import DEMOS_FOLDER, data_path
from pytest_libero.report.allure_config import ALLURE_ENV

DEMOS = Path(str(data_path(DEMOS_FOLDER)))
"""The shipped demonstrations' provenance, as this checkout holds them for the wheel."""
SMOKE_CAP = ("--libero-budget-mode=decisions", "--libero-max-policy-calls=1")
"""The smoke and the perturbed cases stop after one policy call: their proof is that a
case builds, runs and is scored, not how long it lasts."""
PERTURBED_CASES = ("libero_10-00", "libero_10-00~environment2", "libero_10-00~semantic2")


EVALUATE_SCRIPT = """\
import numpy as np
from pytest_libero import evaluate


class Still:
    metadata = {}

    def reset(self):
        pass

    def infer(self, observation):
        return {"actions": np.zeros((5, 7))}


found = evaluate(Still(), scope="task_coverage", suite="libero_10", task_ids=[0],
                 budget_mode="decisions", max_policy_calls=1)
print(*(f"{case}={outcome}" for case, outcome in found.outcomes.items()), f"gate={found.gate}")
"""
"""A training script's call of ``evaluate`` on an object of its own, run by the installed
Python from a folder of its own."""


@dataclass(frozen=True)
class Ran:
    """One command run in its own folder, its file opens traced into ``trace``."""

    work: Path
    done: CompletedProcess[str]
    trace: Path

    @property
    def output(self) -> str:
        return self.done.stdout + self.done.stderr


def run_traced(installed: Installed, work: Path, args: list[str], *, timeout: float = 900) -> Ran:
    """``args`` in ``work`` (made here if need be) with every file opened under the
    installed package or the checkout logged."""
    trace = work.parent / f"{work.name}-trace"
    work.mkdir(parents=True, exist_ok=True)
    trace.mkdir()
    done = in_work(installed, work, args, timeout=timeout, PYTEST_LIBERO_OPEN_TRACE=str(trace),
                   PYTEST_LIBERO_OPEN_WATCH=os.pathsep.join([str(installed.package_dir()), str(ROOT)]))
    assert "INTERNALERROR" not in done.stdout + done.stderr, done.stdout[-4000:] + done.stderr[-4000:]
    return Ran(work, done, trace)


def assert_opens_only_installed_files(ran: Ran, installed: Installed, needed: set[str]) -> None:
    """Every file the run opened from the package is in RECORD; none came from the
    checkout; ``needed`` (paths relative to site-packages) were opened."""
    package = installed.package_dir().resolve()
    record = installed.record()
    opened = list(traced(ran.trace))
    from_checkout = [str(path) for path in opened if path.is_relative_to(ROOT.resolve())]
    assert not from_checkout, f"opened from the checkout, not the install: {from_checkout}"
    site = package.parent
    # pytest caches its assertion rewrite of a plugin's modules in __pycache__: bytecode
    # of the package's own code, not a file it reads.
    relative = {path.relative_to(site).as_posix() for path in opened
                if path.is_relative_to(package) and "__pycache__" not in path.parts}
    unlisted = sorted(name for name in relative if name not in record)
    assert not unlisted, f"opened from the install, not in its RECORD (not in the wheel?): {unlisted}"
    assert needed <= relative, f"never opened (is the trace working?): {sorted(needed - relative)}"


class InstalledArtifact:
    """A plain install of ``artifact`` ("wheel" or "sdist") with ``installer`` ("pip" or
    "uv") and the zero smoke run from it."""

    artifact = ""
    installer = "pip"

    @pytest.fixture(scope="class")
    @classmethod
    def installed(cls, artifacts: Artifacts, tmp_path_factory: pytest.TempPathFactory) -> Installed:
        base = interpreter(f"{sys.version_info.major}.{sys.version_info.minor}")
        assert base is not None
        done = install(getattr(artifacts, cls.artifact), cls.venv_folder(tmp_path_factory), base,
                       installer=cls.installer)
        done.trace_opens()
        return done

    @classmethod
    def venv_folder(cls, tmp_path_factory: pytest.TempPathFactory) -> Path:
        return tmp_path_factory.mktemp(cls.artifact) / "venv"

    def test_zero_smoke_fails_every_case_natively(self, installed: Installed, tmp_path: Path) -> None:
        ran = run_traced(installed, tmp_path / "work", ["-m", "pytest", "--libero-profile=zero", *SMOKE_CAP])
        assert ran.done.returncode == 1, ran.output[-4000:]
        assert "2 failed" in ran.done.stdout, ran.output[-4000:]
        records = run_records(run_folder(ran.work / "libero-results", "zero"))
        assert [(r["case"], r["outcome"]) for r in records] == [
            ("libero_10-00", "failure"), ("libero_10-01", "failure")], records


class InstalledProduct(InstalledArtifact):
    """Every command of the product from a plain install of ``artifact``."""

    @pytest.fixture(scope="class")
    @classmethod
    def demo(cls, installed: Installed, tmp_path_factory: pytest.TempPathFactory) -> Ran:
        """README's first command, as it is written there."""
        return run_traced(installed, tmp_path_factory.mktemp("demo") / "work",
                          ["pytest", "--libero-profile=demo", "--alluredir=allure-demo"])

    @pytest.fixture(scope="class")
    @classmethod
    def perturbed(cls, installed: Installed, tmp_path_factory: pytest.TempPathFactory) -> Ran:
        """One task beside two generated perturbations of it that read shipped tables."""
        return run_traced(installed, tmp_path_factory.mktemp("perturbed") / "work", [
            "-m", "pytest", "--libero-profile=zero", "--libero-scope=task_coverage",
            "--libero-suite=libero_10", "--libero-task-ids=0",
            "--libero-perturb=environment:2,semantic:2", *SMOKE_CAP])

    def test_demo_passes_every_case_with_a_video(self, demo: Ran) -> None:
        """Every shipped demonstration succeeds on the pinned stack at the control its
        provenance records, with a video per case: the demo is the evidence that a fresh
        installation works."""
        out = demo.done.stdout
        recorded = {meta["case"]: meta for meta in
                    (json.loads(p.read_text()) for p in sorted(DEMOS.glob("*.json")))}
        assert demo.done.returncode == 0, demo.output[-4000:]
        assert f"{len(recorded)} passed" in out.splitlines()[-1], demo.output[-4000:]
        assert "profile demo (infrastructure evidence, not a capability claim)" in out
        assert "  Recorded demonstrations replayed open loop" in out
        run = run_folder(demo.work / "libero-results", "demo")
        assert f"results: {run}" in out
        plan = json.loads((run / "run.json").read_text())["plan"]
        assert plan["evidence_class"] == "infrastructure" and plan["selection"]["scope"] == "profile"
        records = {r["case"]: r for r in run_records(run)}
        assert sorted(records) == sorted(recorded)
        for case, record in records.items():
            assert record["outcome"] == "success", (case, record.get("summary"))
            first = record["counters"]["first_success_control"]
            assert first == recorded[case]["first_success_control"], case
            assert record["policy_metadata"]["demos"][case] == recorded[case]["actions_sha256"]
            assert (run / "cases" / case / "episode.mp4").stat().st_size > 0, case
        # Allure labels each case infrastructure evidence and names the recording in its panel.
        allure = demo.work / "allure-demo"
        results = [json.loads(p.read_text()) for p in allure.glob("*-result.json")]
        assert sorted(r["status"] for r in results) == ["passed"] * len(recorded)
        for result in results:
            assert {"name": "tag", "value": "INFRASTRUCTURE EVIDENCE"} in result["labels"]
        panel = (allure / "environment.properties").read_text()
        assert "profile.description=Recorded demonstrations replayed open loop" in panel

    def test_demo_opens_only_installed_files(self, demo: Ran, installed: Installed) -> None:
        needed = {f"pytest_libero/data/{name}" for name in (
            "libero_catalog.json", "libero_inventory.json", "profiles/demo.toml",
            "demos/libero_10-00.npy", "demos/libero_10-00.json")}
        assert_opens_only_installed_files(demo, installed, needed)

    def test_a_perturbed_case_runs(self, perturbed: Ran) -> None:
        assert perturbed.done.returncode == 1, perturbed.output[-4000:]  # zero fails natively
        assert "3 failed" in perturbed.done.stdout, perturbed.output[-4000:]
        records = run_records(run_folder(perturbed.work / "libero-results", "zero"))
        assert sorted(r["case"] for r in records) == sorted(PERTURBED_CASES)
        assert {r["outcome"] for r in records} == {"failure"}, records

    def test_a_perturbed_case_opens_only_installed_files(self, perturbed: Ran, installed: Installed) -> None:
        needed = {f"pytest_libero/data/{name}" for name in (
            "environment_room.json", "libero_instructions.json", "profiles/zero.toml")}
        assert_opens_only_installed_files(perturbed, installed, needed)

    def test_evaluate_serves_an_object_of_the_caller_s_process(self, installed: Installed,
                                                               tmp_path: Path) -> None:
        work = tmp_path / "work"
        work.mkdir()
        (work / "train.py").write_text(EVALUATE_SCRIPT)
        ran = run_traced(installed, work, ["python", "train.py"])
        assert ran.done.returncode == 0, ran.output[-4000:]
        assert ran.done.stdout.split() == ["libero_10-00=failure", "gate=none"], ran.output[-4000:]
        records = run_records(run_folder(work / "libero-results", "evaluate"))
        assert [r["outcome"] for r in records] == ["failure"], records
        assert_opens_only_installed_files(ran, installed, {"pytest_libero/data/libero_catalog.json"})

    def test_verify_reexecutes_the_perturbed_run(self, perturbed: Ran, installed: Installed) -> None:
        run = run_folder(perturbed.work / "libero-results", "zero")
        done = in_work(installed, perturbed.work, ["pytest-libero", "verify", str(run)])
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
        assert "3 of 3 cases verified" in done.stdout, done.stdout[-4000:]

    def test_report_renders_the_demo(self, demo: Ran, installed: Installed) -> None:
        allure = allure3()
        if allure is None:
            pytest.skip("no Allure 3 CLI: npm install --prefix /tmp/pytest-libero-tools/allure3 "
                        f"allure@3.18.0 (or set {ALLURE_ENV})")
        done = in_work(installed, demo.work, ["pytest-libero", "report", "allure-demo", "-o",
                                              "allure-report"], **{ALLURE_ENV: allure})
        assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
        assert (demo.work / "allure-report" / "index.html").is_file(), sorted(demo.work.iterdir())
        assert "report: " in done.stdout, done.stdout
