"""compare, table, card and export --csv on the folder of a real run (issue 64): two
libero_10 cases of the zero policy, two decisions each, shared by every test here. The
numbers are tests/test_publish.py's business; this checks that a folder the plugin
wrote is read whole and that the CSV carries each record's own seed and hashes."""

from __future__ import annotations

import csv
import io
from pathlib import Path

import pytest
import yaml
from cli_runs import in_process
from huggingface_hub.repocard_data import model_index_to_eval_results

from harness.runs import records_by_case, run_folder, run_pytest

pytestmark = pytest.mark.simulator

ARGS = ["--libero-profile=zero", "--libero-budget-mode=decisions", "--libero-max-policy-calls=2",
        "--libero-replan-interval=2", "--libero-scope=development", "--libero-task-ids=0,1",
        "--libero-evidence=replayable", "--libero-isolation=none"]


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("publish")
    done = run_pytest(["-q", *ARGS], root, timeout=600)
    assert "2 failed" in done.stdout, done.stdout[-2000:] + done.stderr[-2000:]
    return run_folder(root / "libero-results")


def test_the_csv_carries_each_record_s_seed_and_hashes(run: Path, tmp_path: Path) -> None:
    out = tmp_path / "episodes.csv"
    code, said, err = in_process(["export", str(run), "--csv", str(out)])
    assert code == 0, err
    rows = list(csv.DictReader(io.StringIO(out.read_text())))
    records = records_by_case(run)
    assert [r["case"] for r in rows] == ["libero_10-00", "libero_10-01"]
    for row in rows:
        record = records[row["case"]]
        identity = record["identity"]
        assert row["seed"] == str(identity["seed"]) == "20260907"
        for key in ("bddl_sha256", "init_file_sha256", "state_sha256", "settled_state_sha256"):
            assert row[key] == identity[key] and len(row[key]) == 64
        assert row["task_name"] == record["entry"]["name"] and row["init_state"] == "0"
        assert row["outcome"] == "failure" and row["executed_controls"] == "4"
        assert row["policy_calls"] == "2" and row["score"] == str(float(record["score"]))


def test_table_compare_and_card_read_the_real_folder(run: Path) -> None:
    code, out, err = in_process(["table", str(run)])
    assert code == 0, err
    assert "libero_10      2          2        0  0.0 [0.0, 65.8]" in out
    code, out, err = in_process(["compare", str(run), str(run)])  # a run against itself
    assert code == 0, err
    assert "no significant difference on libero_10 (B - A = +0.0 points" in out
    code, out, err = in_process(["card", str(run)])
    assert code == 0, err
    front = out[4:].partition("\n---\n")[0]
    name, results = model_index_to_eval_results(yaml.safe_load(front)["model-index"])
    assert name == "zero" and results[0].dataset_config == "libero_10"
    assert "not a capability claim" in out and f"pytest-libero verify {run}" in out
