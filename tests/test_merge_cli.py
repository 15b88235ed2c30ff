"""pytest-libero merge: joins shards, refuses mixtures and duplicates, gates the whole."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from pytest_libero.protocol.identity import protocol_identity

CASES = ["libero_10-00", "libero_10-01", "libero_10-02", "libero_10-03"]


def shard_folder(root: Path, index: int, outcomes: dict[str, str], **plan: Any) -> Path:
    folder = root / "zero" / "run" / f"shard-{index}-of-2"
    folder.mkdir(parents=True)
    run = {
        "protocol_identity": protocol_identity(),
        "plan": {
            "profile": {"name": "zero", "sha256": "abc"},
            "selection": {"scope": "development", "task_ids": [0, 1, 2, 3]},
            "selection_cases": CASES, "cases": list(outcomes), "shard": [index, 2],
            "budget_mode": "decisions", "max_policy_calls": 1, "replan_interval": 1,
            "track": "rgb", "evidence_class": "infrastructure", **plan,
        },
    }
    (folder / "run.json").write_text(json.dumps(run))
    lines = [json.dumps({"case": c, "outcome": o, "entry": {"suite": "libero_10"}})
             for c, o in outcomes.items()]
    (folder / "results.jsonl").write_text("\n".join(lines) + "\n")
    return folder


def merge(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "pytest_libero.cli", "merge", *args],
                          capture_output=True, text=True)


def test_merge_joins_shards_and_gates_the_whole(tmp_path: Path) -> None:
    a = shard_folder(tmp_path, 1, {"libero_10-00": "success", "libero_10-02": "failure"})
    b = shard_folder(tmp_path, 2, {"libero_10-01": "success"})  # libero_10-03 never ran
    done = merge(str(a), str(b), "--out", str(tmp_path / "merged"))
    assert done.returncode == 0, done.stderr
    summary = json.loads((tmp_path / "merged" / "summary.json").read_text())
    assert summary["counts"] == {"selected": 4, "completed": 3, "success": 2, "failure": 1,
                                 "errored": 0, "unattempted": 1}
    assert summary["unattempted"] == ["libero_10-03"]
    assert "state_fed" not in summary  # folders from before state_fed say nothing of it
    lines = (tmp_path / "merged" / "results.jsonl").read_text().splitlines()
    assert [json.loads(line)["case"] for line in lines] == CASES[:3]  # selection order
    gated = merge(str(a), str(b), "--out", str(tmp_path / "gated"), "--min-success", "0.5")
    assert gated.returncode == 1  # the unattempted case makes the evaluation incomplete
    assert "min-success gate FAILED: 0 errored and 1 unattempted" in gated.stdout


def test_merge_baseline_gate_and_refusals(tmp_path: Path) -> None:
    a = shard_folder(tmp_path, 1, {"libero_10-00": "failure", "libero_10-01": "failure"})
    b = shard_folder(tmp_path, 2, {"libero_10-02": "failure", "libero_10-03": "failure"})
    base = tmp_path / "base"
    base.mkdir()
    (base / "run.json").write_text(json.dumps({"protocol_identity": protocol_identity()}))
    (base / "results.jsonl").write_text("".join(
        json.dumps({"case": c, "outcome": "success", "entry": {"suite": "libero_10"}}) + "\n"
        for c in CASES))
    worse = merge(str(a), str(b), "--out", str(tmp_path / "m1"), "--baseline", str(base),
                  "--baseline-alpha", "0.1")
    assert worse.returncode == 1  # 4 of 4 flipped to failure: one-sided p = 1/16
    assert "baseline gate FAILED: 4 paired cases, 4 success->failure" in worse.stdout
    assert "p = 0.0625" in worse.stdout

    other = shard_folder(tmp_path / "x", 2, {"libero_10-01": "success"}, track="rgb+proprio")
    refused = merge(str(a), str(other), "--out", str(tmp_path / "m2"))
    assert refused.returncode == 2 and "budgets differs" in refused.stderr
    checkpoint = shard_folder(tmp_path / "z", 2, {"libero_10-01": "success"},
                              profile={"name": "zero", "sha256": "abc", "options": {"ckpt": "b"}})
    refused = merge(str(a), str(checkpoint), "--out", str(tmp_path / "m4"))
    assert refused.returncode == 2 and "policy options differs ({'ckpt': 'b'} vs {})" in refused.stderr
    twice = shard_folder(tmp_path / "y", 2, {"libero_10-00": "success"})
    duplicate = merge(str(a), str(twice), "--out", str(tmp_path / "m3"))
    assert duplicate.returncode == 2 and "appears in both" in duplicate.stderr


def test_merge_keeps_what_the_runs_fed_as_state(tmp_path: Path) -> None:
    a = shard_folder(tmp_path, 1, {"libero_10-00": "failure"})
    b = shard_folder(tmp_path, 2, {"libero_10-01": "failure"})
    for folder in (a, b):
        run = json.loads((folder / "run.json").read_text())
        run["plan"]["profile"]["state_fed"] = "constant"
        (folder / "run.json").write_text(json.dumps(run))
    done = merge(str(a), str(b), "--out", str(tmp_path / "merged"))
    assert done.returncode == 0, done.stderr
    assert json.loads((tmp_path / "merged" / "summary.json").read_text())["state_fed"] == "constant"
