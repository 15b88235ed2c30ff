"""Record schema 2, and folders written under schema 1 read as before.

Schema 2 stopped repeating a generated perturbation's kind and level at the top of the
record's ``entry`` and renamed the summary's pair keys (docs/records.md). Older run
folders stay readable: resume continues one, merge joins one with a newer one, a
baseline compares with one. Folders are real (made by the plugin with every case
deselected), their records written here in the schema under test; no simulator runs.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from synthetic import synthetic_record

from pytest_libero.catalog.case_id import CaseId
from pytest_libero.episode.record import READABLE_SCHEMAS, RECORD_SCHEMA
from pytest_libero.evidence.renderer import identity as renderer_identity
from pytest_libero.protocol.errors import SetupError
from pytest_libero.results.gate import load_baseline
from pytest_libero.results.merge import merge_runs

pytest_plugins = ["pytester"]

SCHEMA_1 = "pytest-libero-record/1"
SELECTION = ["--libero-profile=zero", "--libero-scope=development", "--libero-task-ids=0,1",
             "--libero-perturb=camera:2", "--libero-isolation=none"]
"""No case runs here: in-process isolation measures the renderer without starting a
forkserver that compiles a scene for cases (about 3 s less a run)."""
OUTCOMES = {"libero_10-00": "success", "libero_10-00~camera2": "failure",
            "libero_10-01": "success", "libero_10-01~camera2": "success"}


def record(case: str, schema: str) -> dict[str, Any]:
    """A case record as ``schema`` writes it."""
    made: dict[str, Any] = dict(synthetic_record(case, OUTCOMES[case]))
    case_id = CaseId.parse(case)
    entry = made["entry"]
    entry.update(family="libero", language_source="task_name")
    if case_id.variant is not None:
        kind, level = case_id.variant.kind, case_id.variant.level
        entry.update(perturbation={"kind": kind, "level": level}, twin=str(case_id.base))
        if schema == SCHEMA_1:
            entry.update(kind=kind, level=level)
    return made


def empty_run(pytester: pytest.Pytester, run_id: str, *extra: str) -> Path:
    """A real run folder whose cases were all deselected: run.json, no records."""
    result = pytester.runpytest_subprocess(*SELECTION, *extra, f"--libero-run-id={run_id}",
                                           "-k", "nothing")
    assert result.ret == pytest.ExitCode.NO_TESTS_COLLECTED, result.stdout.str()
    [folder] = [line.removeprefix("results: ") for line in result.outlines
                if line.startswith("results: ")]
    return Path(folder)


def written_as(folder: Path, schema: str, cases: list[str] | None = None) -> Path:
    """Give ``folder`` records of its own cases in ``schema``, and that schema in run.json."""
    run = json.loads((folder / "run.json").read_text())
    assert run["record_schema"] == RECORD_SCHEMA
    run["record_schema"] = schema
    (folder / "run.json").write_text(json.dumps(run))
    records = [record(case, schema) for case in cases or run["plan"]["cases"]]
    for made in records:  # rendered where the folder was made, as a real case is
        made.setdefault("identity", {})["renderer"] = renderer_identity(run["renderer"])
    lines = [json.dumps(made) for made in records]
    (folder / "results.jsonl").write_text("".join(line + "\n" for line in lines))
    return folder


def paired(summary: dict[str, Any]) -> dict[str, Any]:
    block: dict[str, Any] = summary["robustness"]["kinds"]["camera"]["paired"]
    return block


def test_a_schema_1_folder_resumes_and_its_summary_reads_its_records(
    pytester: pytest.Pytester,
) -> None:
    old = written_as(empty_run(pytester, "old"), SCHEMA_1)
    resumed = pytester.runpytest_subprocess(*SELECTION, f"--libero-resume={old}")
    resumed.assert_outcomes(skipped=1)  # every case was done: nothing ran
    summary = json.loads((old / "summary.json").read_text())
    assert summary["counts"]["completed"] == 4
    assert summary["suites"]["libero_10"]["successes"] == 2  # the twins alone
    assert summary["suites"]["libero_10~camera2"]["successes"] == 1
    cells = paired(summary)
    assert (cells["pairs"], cells["both"], cells["only_twin"], cells["only_perturbed"],
            cells["neither"]) == (2, 1, 1, 0, 0)
    assert cells["perturbed"]["rate"] == 0.5 and "only_ood" not in cells
    run = json.loads((old / "run.json").read_text())
    assert run["record_schema"] == SCHEMA_1  # what the folder started with
    assert run["resumed"][-1]["record_schema"] == RECORD_SCHEMA  # what the resume appends


def test_folders_of_both_schemas_merge_and_a_schema_1_baseline_compares(
    pytester: pytest.Pytester, tmp_path: Path,
) -> None:
    first = written_as(empty_run(pytester, "sharded", "--libero-shard=1/2"), SCHEMA_1)
    second = empty_run(pytester, "sharded", "--libero-shard=2/2")
    written_as(second, RECORD_SCHEMA)
    merged = merge_runs([first, second], tmp_path / "merged")
    summary = json.loads((merged / "summary.json").read_text())
    assert summary["counts"]["completed"] == 4
    cells = paired(summary)
    assert (cells["pairs"], cells["both"], cells["only_twin"]) == (2, 1, 1)
    assert summary["robustness"]["suites"]["libero_10~camera2"]["base"] == "libero_10"
    # The same numbers as a folder written wholly under schema 2.
    again = written_as(empty_run(pytester, "new"), RECORD_SCHEMA)
    assert json.loads((merge_runs([again], tmp_path / "m2") / "summary.json").read_text())[
        "robustness"] == summary["robustness"]
    baseline = load_baseline(first, summary["protocol_identity"],
                             extra={"perturb_identity": summary["perturb_identity"]})
    assert set(baseline) == set(json.loads((first / "run.json").read_text())["plan"]["cases"])


def test_a_schema_this_version_does_not_read_is_refused_by_name(
    pytester: pytest.Pytester, tmp_path: Path,
) -> None:
    assert READABLE_SCHEMAS == (SCHEMA_1, RECORD_SCHEMA) == (SCHEMA_1, "pytest-libero-record/2")
    future = written_as(empty_run(pytester, "future"), "pytest-libero-record/9")
    with pytest.raises(SetupError, match="records are pytest-libero-record/9, which this "
                                         "pytest-libero does not read"):
        merge_runs([future], tmp_path / "merged")
    refused = pytester.runpytest_subprocess(*SELECTION, f"--libero-resume={future}")
    assert refused.ret != pytest.ExitCode.OK
    refused.stderr.fnmatch_lines(["*--libero-resume=*records are pytest-libero-record/9*"])
