"""``pytest-libero verify`` against real LIBERO runs: an untouched run verifies; edits that
keep every file hash consistent are caught by re-execution; missing files and another
simulator version make a case not verifiable, each with its reason."""

from __future__ import annotations

import base64
import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from cli_runs import own_process

from harness.runs import run_pytest
from pytest_libero.protocol.hashing import array_sha256, sha256_file
from pytest_libero.results.merge import merge_runs

pytestmark = pytest.mark.simulator

TINY = ["--libero-profile=random", "--libero-budget-mode=decisions", "--libero-max-policy-calls=3",
        "--libero-replan-interval=3"]


def verify(run: Path, *args: str, unprivileged: bool = False) -> tuple[int, str, dict[str, Any]]:
    code, out, err = own_process(["verify", str(run), *args], unprivileged=unprivileged, timeout=900)
    verdicts = json.loads((run / "verify.json").read_text()) if (run / "verify.json").exists() else {}
    return code, out + err, verdicts


@pytest.fixture(scope="module")
def recorded(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One fast-mode run on the proprio track, full evidence: two cases, random actions."""
    root = tmp_path_factory.mktemp("verify")
    run_pytest(["-q", *TINY, "--libero-scope=development", "--libero-task-ids=0,1",
                "--libero-track=rgb+proprio", "--libero-run-id=original"], root, timeout=900)
    run = root / "libero-results" / "random" / "original"
    assert (run / "results.jsonl").is_file()
    return run


def copy_of(run: Path, tmp_path: Path) -> Path:
    target = tmp_path / run.name
    shutil.copytree(run, target)
    return target


def rewrite_line(path: Path, index: int, change: Any) -> None:
    lines = path.read_text().splitlines()
    lines[index] = json.dumps(change(json.loads(lines[index])), sort_keys=True)
    path.write_text("\n".join(lines) + "\n")


def rehash(run: Path, case: str, name: str) -> None:
    """Make the record agree with an edited evidence file, as a careful forger would."""
    digest = sha256_file(run / "cases" / case / name)
    size = (run / "cases" / case / name).stat().st_size

    def fix(record: dict[str, Any]) -> dict[str, Any]:
        if record["case"] == case:
            record["evidence"]["files"][name] = {"bytes": size, "sha256": digest}
        return record

    results = run / "results.jsonl"
    for i in range(len(results.read_text().splitlines())):
        rewrite_line(results, i, fix)
    episode = run / "cases" / case / "episode.json"
    episode.write_text(json.dumps(fix(json.loads(episode.read_text())), indent=1, sort_keys=True))


def test_an_untouched_run_verifies(recorded: Path) -> None:
    code, output, verdicts = verify(recorded, "-n", "2")
    assert code == 0, output
    assert verdicts["passed"] is True and verdicts["counts"]["verified"] == 2
    assert "libero_10-00 VERIFIED" in output and "2 of 2 cases verified" in output
    assert all(c["checked"]["images_compared"] for c in verdicts["cases"])


def test_an_action_changed_with_consistent_hashes_fails_by_re_execution(
    recorded: Path, tmp_path: Path
) -> None:
    run = copy_of(recorded, tmp_path)
    actions = run / "cases" / "libero_10-01" / "actions.jsonl"

    def push(line: dict[str, Any]) -> dict[str, Any]:
        chunk = np.frombuffer(base64.b64decode(line["actions"]["base64"]), dtype=np.float64)
        chunk = chunk.reshape(line["actions"]["shape"]).copy()
        chunk[0, 0] = -chunk[0, 0] if chunk[0, 0] else 0.9
        line["actions"]["base64"] = base64.b64encode(chunk.tobytes()).decode()
        line["actions"]["sha256"] = array_sha256(chunk)
        return line

    rewrite_line(actions, 0, push)
    rehash(run, "libero_10-01", "actions.jsonl")
    code, output, verdicts = verify(run)
    assert code == 1, output
    by_case = {c["case"]: c for c in verdicts["cases"]}
    assert by_case["libero_10-00"]["status"] == "verified"
    bad = by_case["libero_10-01"]
    assert bad["status"] == "mismatch" and bad["difference"]["call"] == 2
    assert bad["difference"]["field"] in ("agentview", "robot0_eye_in_hand", "proprio")
    assert "libero_10-01 MISMATCH" in output


def test_a_changed_observation_hash_fails_and_names_the_delivery(
    recorded: Path, tmp_path: Path
) -> None:
    run = copy_of(recorded, tmp_path)
    index = run / "cases" / "libero_10-00" / "observations.jsonl"
    forged = "0" * 64

    def forge(line: dict[str, Any]) -> dict[str, Any]:
        line["images"]["agentview"]["sha256"] = forged
        return line

    rewrite_line(index, 2, forge)
    rehash(run, "libero_10-00", "observations.jsonl")
    code, output, verdicts = verify(run, "--case", "libero_10-00")
    assert code == 1
    [verdict] = verdicts["cases"]
    assert verdict["status"] == "mismatch"
    assert verdict["difference"] == {"call": 3, "executed_controls": 6, "field": "agentview",
                                     "recorded": forged, "replayed": verdict["difference"]["replayed"]}
    # An edit without re-hashing is caught before any simulator starts.
    rewrite_line(index, 0, forge)
    code, output, verdicts = verify(run, "--case", "libero_10-00")
    assert "file observations.jsonl does not have its recorded sha256" in verdicts["cases"][0]["reason"]


def test_missing_files_and_another_simulator_are_not_verifiable(recorded: Path, tmp_path: Path) -> None:
    run = copy_of(recorded, tmp_path)
    (run / "cases" / "libero_10-00" / "actions.jsonl").unlink()
    code, output, verdicts = verify(run, "--case", "libero_10-00")
    assert code == 1
    assert verdicts["cases"][0]["status"] == "not_verifiable"
    assert "actions.jsonl is missing" in verdicts["cases"][0]["reason"]

    run_json = json.loads((run / "run.json").read_text())
    run_json["installed"]["robosuite"] = "1.4.1"
    (run / "run.json").write_text(json.dumps(run_json))
    code, output, verdicts = verify(run, "--case", "libero_10-01")
    assert code == 1
    assert "robosuite 1.4.1 (run) vs 1.4.0 (installed)" in verdicts["cases"][0]["reason"]


def edit(path: Path, change: Any) -> None:
    """Rewrite a JSON file, or every line of a JSON-lines file, through ``change``."""
    if path.suffix == ".jsonl":
        for i in range(len(path.read_text().splitlines())):
            rewrite_line(path, i, change)
    else:
        path.write_text(json.dumps(change(json.loads(path.read_text())), sort_keys=True))


def in_both(run: Path, case: str, change: Any) -> None:
    """Change a case's record in results.jsonl and its episode.json alike."""
    edit(run / "results.jsonl", lambda r: change(r) if r["case"] == case else r)
    edit(run / "cases" / case / "episode.json", change)


def statuses(verdicts: dict[str, Any]) -> dict[str, tuple[str, str]]:
    return {c["case"]: (c["status"], c["reason"]) for c in verdicts["cases"]}


def test_episode_json_and_results_jsonl_must_agree_field_by_field(
    recorded: Path, tmp_path: Path
) -> None:
    """A value edited in one account of a case and not the other is a mismatch naming
    the field; decided before any simulator starts."""
    run = copy_of(recorded, tmp_path)
    drawn = {"kind": "camera", "level": 2, "parameters": {"yaw_deg": 3.0}, "seed": 1}
    in_both(run, "libero_10-01", lambda r: {**r, "perturbation": drawn})
    edit(run / "cases" / "libero_10-01" / "episode.json",
         lambda r: {**r, "perturbation": {**drawn, "parameters": {"yaw_deg": 4.0}}})
    edit(run / "results.jsonl", lambda r: {**r, "counters": {**r["counters"], "decisions": 9}}
         if r["case"] == "libero_10-00" else r)
    code, output, verdicts = verify(run)
    assert code == 1, output
    assert "renderer here" not in output  # nothing was left to re-execute
    by_case = {c["case"]: c for c in verdicts["cases"]}
    edited = by_case["libero_10-01"]
    assert edited["status"] == "mismatch"
    assert edited["difference"] == {"field": "perturbation.parameters.yaw_deg",
                                    "results.jsonl": 3.0, "episode.json": 4.0}
    assert edited["reason"].startswith("perturbation.parameters.yaw_deg differs between the "
                                       "record in results.jsonl and its case folder's episode.json")
    assert by_case["libero_10-00"]["difference"]["field"] == "counters.decisions"


def test_the_entry_is_checked_against_the_installed_catalog(recorded: Path, tmp_path: Path) -> None:
    """An entry edited in both files alike (an OOD case's level, a native case's
    instruction) is what re-execution would faithfully open: the catalog catches it."""
    from pytest_libero.catalog.entries import load_catalog

    ood = load_catalog().ood_entries[0]
    forged = {**ood.as_dict(identity="libero-ood-v1:forged"), "level": ood.ood.level + 1}  # type: ignore[union-attr]
    run = copy_of(recorded, tmp_path)
    in_both(run, "libero_10-00", lambda r: {**r, "case": ood.case_id, "entry": forged})
    (run / "cases" / "libero_10-00").rename(run / "cases" / ood.case_id)
    in_both(run, "libero_10-01", lambda r: {**r, "entry": {**r["entry"], "language": "stack the cups"}})
    code, output, verdicts = verify(run)
    assert code == 1, output
    by_case = {c["case"]: c for c in verdicts["cases"]}
    assert by_case[ood.case_id]["status"] == "mismatch"
    assert by_case[ood.case_id]["difference"] == {"field": "entry.level", "recorded": ood.ood.level + 1,  # type: ignore[union-attr]
                                                  "catalog": ood.ood.level}  # type: ignore[union-attr]
    assert "the installed catalog's entry for this case" in by_case[ood.case_id]["reason"]
    assert by_case["libero_10-01"]["difference"]["field"] == "entry.language"


def test_a_case_folder_missing_unreadable_or_without_its_record_is_not_verifiable(
    recorded: Path, tmp_path: Path
) -> None:
    """Never a fallback to another folder: a copied run whose case folder is gone is not
    verified from the original through the record's absolute evidence_dir."""
    run = copy_of(recorded, tmp_path)
    (run / "cases" / "libero_10-00" / "episode.json").unlink()
    (run / "cases" / "libero_10-01" / "episode.json").write_text("{not json")
    code, output, verdicts = verify(run)
    assert code == 1 and "Traceback" not in output, output
    found = statuses(verdicts)
    assert found["libero_10-00"][0] == found["libero_10-01"][0] == "not_verifiable"
    assert found["libero_10-00"][1].endswith("libero_10-00/episode.json is missing: the case's "
                                             "own record is gone, so its line in results.jsonl "
                                             "cannot be checked")
    assert "libero_10-01/episode.json is not JSON" in found["libero_10-01"][1]

    copied = tmp_path / "copied"
    shutil.copytree(recorded, copied)
    shutil.rmtree(copied / "cases" / "libero_10-00")  # the original's is still there
    (copied / "cases" / "libero_10-01").chmod(0)
    try:
        code, output, verdicts = verify(copied, unprivileged=True)
    finally:
        (copied / "cases" / "libero_10-01").chmod(0o755)
    assert code == 1 and "Traceback" not in output, output
    found = statuses(verdicts)
    assert found["libero_10-00"] == ("not_verifiable", f"no case folder {copied}/cases/libero_10-00: "
                                     "a run folder is verified from its own cases/ only (copy them "
                                     "with it)")
    assert found["libero_10-01"] == ("not_verifiable", f"cannot read the case folder {copied}/cases/"
                                     "libero_10-01 (Permission denied); give this user read access "
                                     "to it")


def test_what_verify_echoes_is_bounded(recorded: Path, tmp_path: Path) -> None:
    """A megabyte edited into a record is named, not printed: the line and verify.json
    hold a cut of it."""
    run = copy_of(recorded, tmp_path)
    edit(run / "cases" / "libero_10-00" / "episode.json", lambda r: {**r, "summary": "x" * 10**6})
    code, output, verdicts = verify(run, "--case", "libero_10-00")
    assert code == 1, output
    assert max(len(line) for line in output.splitlines()) < 3000
    [case] = verdicts["cases"]
    assert case["difference"]["field"] == "summary"
    assert len(case["difference"]["episode.json"]) < 2100
    assert (run / "verify.json").stat().st_size < 20_000


def test_a_run_from_before_fingerprints_on_another_backend_is_not_verifiable(
    recorded: Path, tmp_path: Path
) -> None:
    """Without a fingerprint only the GL backend tells renderers apart: another one is
    another renderer, so the images are not compared and the case is not verifiable;
    what rendering does not touch is still re-executed."""
    run = copy_of(recorded, tmp_path)
    run_json = json.loads((run / "run.json").read_text())
    run_json["render"]["backend"] = "osmesa"
    del run_json["renderer"]
    (run / "run.json").write_text(json.dumps(run_json))

    def forget(record: dict[str, Any]) -> dict[str, Any]:
        del record["identity"]["renderer"]
        return record

    for case in ("libero_10-00", "libero_10-01"):  # an old run wrote neither account with it
        in_both(run, case, forget)
    code, output, verdicts = verify(run, "--case", "libero_10-00")
    assert code == 1, output
    assert "MUJOCO_GL=osmesa (run) vs egl here" in output
    assert verdicts["images_compared"] is False
    [case] = verdicts["cases"]
    assert case["status"] == "not_verifiable"
    assert case["reason"].startswith("renderer differs (run: not recorded, rendered with "
                                     "MUJOCO_GL=osmesa (run) vs egl here; here: ")
    assert "images not compared, the rest re-executed: 3 deliveries" in case["reason"]


def test_merged_full_mode_shards_at_replayable_evidence_verify(tmp_path: Path) -> None:
    args = ["--libero-profile=random", "--libero-mode=full", "--libero-scope=task_coverage",
            "--libero-suite=libero_object", "--libero-task-ids=0", "--libero-init-states=0,1",
            "--libero-budget-mode=decisions", "--libero-max-policy-calls=2",
            "--libero-replan-interval=3", "--libero-run-id=sharded"]
    for index in (1, 2):
        run_pytest(["-q", *args, f"--libero-shard={index}/2"], tmp_path, timeout=900)
    base = tmp_path / "libero-results" / "random" / "sharded"
    merged = merge_runs([base / "shard-1-of-2", base / "shard-2-of-2"])
    code, output, verdicts = verify(merged, "-n", "2")
    assert code == 0, output
    assert sorted(c["case"] for c in verdicts["cases"]) == ["libero_object-00-s0", "libero_object-00-s1"]
    assert not any((merged / "cases").glob("*"))  # the evidence stayed in the shards
