"""The renderer fingerprint, measured by real rendering in real sessions.

xdist workers each measure and record their own: one worker here runs llvmpipe at
128-bit vectors (``LP_NATIVE_VECTOR_WIDTH``), which says so in its GL renderer string,
so the run's workers render differently and the run must say so. Sessions on one
machine measure one fingerprint. A run edited to name another renderer is refused by
resume and the baseline gate, and verify answers "renderer differs" for it; every
evidence file, safety.npz included, is checked by verify.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from pytest_libero.evidence.renderer import describe, known, same
from pytest_libero.protocol.errors import SetupError
from pytest_libero.results.merge import merge_runs

pytestmark = pytest.mark.simulator

TINY = ["--libero-profile=zero", "--libero-budget-mode=decisions",
        "--libero-max-policy-calls=1", "--libero-replan-interval=1",
        "--libero-scope=development", "--libero-task-ids=0,1"]
FAKE = {"vendor": "NVIDIA Corporation", "renderer": "NVIDIA H200/PCIe/SSE2",
        "version": "4.6.0 NVIDIA 550.54.15"}


def pytest_run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          cwd=cwd, capture_output=True, text=True, timeout=900)


def records(run: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]


def edited(run: Path, target: Path, change: dict[str, Any]) -> Path:
    """A copy of the run whose records name another renderer (in results.jsonl and in
    each case folder's episode.json alike, as a run on that renderer writes them)."""
    shutil.copytree(run, target)
    lines = []
    for record in records(target):
        record["identity"]["renderer"].update(change)
        lines.append(json.dumps(record, sort_keys=True))
        episode = target / "cases" / record["case"] / "episode.json"
        kept = json.loads(episode.read_text())
        kept["identity"]["renderer"].update(change)
        episode.write_text(json.dumps(kept, sort_keys=True))
    (target / "results.jsonl").write_text("\n".join(lines) + "\n")
    return target


@pytest.fixture(scope="module")
def mixed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Two cases on two xdist workers; the first worker's llvmpipe uses 128-bit vectors."""
    root = tmp_path_factory.mktemp("mixed")
    done = pytest_run(root, *TINY, "-d", "--tx", "popen//env:LP_NATIVE_VECTOR_WIDTH=128",
                      "--tx", "popen", "--libero-run-id=mixed")
    return root / "libero-results" / "zero" / "mixed", done.stdout + done.stderr


@pytest.fixture(scope="module")
def plain(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Another session on this machine, without workers, stopped after its first case."""
    root = tmp_path_factory.mktemp("plain")
    pytest_run(root, *TINY, "-p", "no:xdist", "-x", "--libero-run-id=plain")
    return root / "libero-results" / "zero" / "plain"


def test_each_worker_records_its_own_renderer_and_a_mixed_run_says_so(
        mixed: tuple[Path, str]) -> None:
    run, output = mixed
    by_worker = {r["worker"]: r["identity"]["renderer"] for r in records(run)}
    assert sorted(by_worker) == ["gw0", "gw1"], output
    narrow, native = by_worker["gw0"], by_worker["gw1"]
    assert "128 bits" in narrow["renderer"]
    controller = json.loads((run / "run.json").read_text())["renderer"]
    assert same(native, controller)  # a worker like the controller measures what it does
    assert not same(narrow, native)  # the description counts, not only the pixels
    summary = json.loads((run / "summary.json").read_text())
    assert summary["renderer"]["mixed"] is True
    assert "RENDERERS DIFFER: this run's images come from 2 renderers" in output
    assert f"{describe(narrow)} (gw0: 1 case)" in output
    with pytest.raises(SetupError) as refused:
        merge_runs([run], run.parent / "merged")
    assert describe(narrow) in str(refused.value) and describe(native) in str(refused.value)


def test_sessions_on_one_machine_measure_one_fingerprint(
        mixed: tuple[Path, str], plain: Path) -> None:
    first = json.loads((mixed[0] / "run.json").read_text())["renderer"]  # measured apart
    second = json.loads((plain / "run.json").read_text())["renderer"]  # where cases render
    assert first["sha256"] and same(first, second), (first, second)
    assert first["cameras"] == second["cameras"]
    assert all(same(r["identity"]["renderer"], second) for r in records(plain))
    if "llvmpipe" in str(second["renderer"]):  # the machine this package was measured on
        assert known(second) is not None, "Mesa changed: measure and ship its fingerprint"


@pytest.mark.parametrize("change", [FAKE, {"sha256": "0" * 64}],
                         ids=["fake-description", "edited-fingerprint"])
def test_resume_and_the_baseline_gate_refuse_another_renderer(
        plain: Path, tmp_path: Path, change: dict[str, Any]) -> None:
    other = edited(plain, tmp_path / "other", change)
    shown = describe(records(other)[0]["identity"]["renderer"])
    resumed = pytest_run(tmp_path, *TINY, "-p", "no:xdist", f"--libero-resume={other}")
    assert resumed.returncode == 4, resumed.stdout + resumed.stderr  # a usage error
    assert "cannot continue that run here: the images come from different renderers" in resumed.stderr
    assert shown in resumed.stderr and "(this session)" in resumed.stderr
    gated = pytest_run(tmp_path, *TINY, "-p", "no:xdist", f"--libero-baseline={other}")
    assert gated.returncode == 4 and f"--libero-baseline={other} cannot judge this run" in gated.stderr
    assert shown in gated.stderr
    assert not (tmp_path / "libero-results").exists()  # refused before any run folder


def verify(run: Path, *args: str) -> tuple[str, dict[str, Any]]:
    done = subprocess.run([sys.executable, "-m", "pytest_libero.cli", "verify", str(run), *args],
                          capture_output=True, text=True, timeout=900)
    return done.stdout + done.stderr, json.loads((run / "verify.json").read_text())


def test_verify_answers_renderer_differs_and_checks_safety_signals(
        plain: Path, tmp_path: Path) -> None:
    other = edited(plain, tmp_path / "other", {"sha256": "0" * 64})
    output, verdicts = verify(other)
    [case] = verdicts["cases"]
    assert case["status"] == "not_verifiable", output
    here = describe(verdicts["renderer_here"])
    assert case["reason"].startswith(
        f"renderer differs (run: {describe(records(other)[0]['identity']['renderer'])}, "
        f"here: {here}); images not compared, the rest re-executed")
    assert verdicts["images_compared"] is False
    # safety.npz is an evidence file like the rest: hashed, and checked.
    tampered = tmp_path / "tampered"
    shutil.copytree(plain, tampered)
    [record] = records(tampered)
    assert "safety.npz" in record["evidence"]["files"]
    with (tampered / "cases" / record["case"] / "safety.npz").open("ab") as signals:
        signals.write(b"\0")
    output, verdicts = verify(tampered)
    assert verdicts["cases"][0]["status"] == "mismatch", output
    assert "file safety.npz does not have its recorded sha256" in verdicts["cases"][0]["reason"]
